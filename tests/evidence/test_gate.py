"""The gate end to end on a real embedded forge: verify, merge, staleness, environment."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import pytest

from assay.errors import Failed
from assay.evidence.gate import (
    MergeOutcome,
    MergeRefused,
    merge,
    merge_decision,
    review_table,
    verify,
)
from assay.evidence.rule import Verdict
from assay.evidence.table import BEGIN
from assay.forge import open_forge
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, git
from tests.forge_fixtures import serve_http

GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


def assert_squashed(scene: Scene, head: str, *, onto: str | None) -> None:
    """Main is one new commit on ``onto`` holding the head's code and no ``.assay/``, its
    trailers naming the brief, the head and the run ref that keeps the branch."""
    gd = ["--git-dir", str(scene.forge)]
    main = scene.main_sha()
    assert main is not None and main != head
    assert git(*gd, "rev-list", "--parents", "-n1", "main").split()[1:] == [onto]
    assert git(*gd, "ls-tree", "-r", "--name-only", "main", ".assay") == ""
    assert git(*gd, "diff", "--name-only", head, "main", "--", ".", ":!.assay") == ""
    message = git(*gd, "log", "-1", "--format=%B", "main")
    assert f"Assay-Brief: {BRIEF}\nAssay-Head: {head}\n" in message
    [run] = [line.split(": ")[1] for line in message.splitlines() if line.startswith("Assay-Run")]
    assert scene.ref(run) == head


def _forge_args(scene: Scene) -> list[str]:
    return ["--forge", str(scene.forge)]


def _env(scene: Scene) -> dict[str, str]:
    return {"ASSAY_STATE": str(scene.root / "state"), "ASSAY_VERIFIER": "ci"}


def test_a_claimed_pass_for_a_failing_row_fails_verify_and_merge_leaves_main(
    scene: Scene, run_assay: AssayRunner
) -> None:
    head = scene.desk_commit({"calc.py": BAD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    main_before = scene.main_sha()

    done = run_assay("verify", BRIEF, *_forge_args(scene), "--json", env=_env(scene))
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    rows = {row["row"]: row for row in report["decision"]["rows"]}
    assert rows["unit"]["claimed"] == "pass"
    assert rows["unit"]["verdict"] == "failing"
    assert rows["unit"]["exit"] == 1
    assert rows["lint"]["verdict"] == "pass"
    assert "add is wrong" in report["ran"][0]["output_tail"]
    table = run_assay("verify", BRIEF, *_forge_args(scene), env=_env(scene))
    assert table.returncode == 1
    assert "unit: last lines of its output" in table.stdout
    assert "AssertionError: add is wrong" in table.stdout

    refused = run_assay("merge", BRIEF, *_forge_args(scene), env=_env(scene))
    assert refused.returncode == 1
    assert "row 'unit': failing: fail (exit 1)" in refused.stderr
    assert scene.main_sha() == main_before


def test_every_row_passing_merges_and_marks_the_review(
    scene: Scene, run_assay: AssayRunner
) -> None:
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)

    done = run_assay("verify", BRIEF, *_forge_args(scene), env=_env(scene))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed" in done.stdout
    body = scene.review()["body"]
    assert body.startswith("Adds calc.")
    assert BEGIN in body and "| unit | `python3 check.py` | pass | pass |" in body

    main_before = scene.main_sha()
    merged = run_assay("merge", BRIEF, *_forge_args(scene), "--json", env=_env(scene))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    result = json.loads(merged.stdout)
    assert result["outcome"] == "squashed"
    assert result["run"] == f"refs/assay/runs/{BRIEF}/1"
    assert_squashed(scene, head, onto=main_before)
    assert scene.review()["state"] == "merged"


def test_a_push_after_verification_makes_evidence_stale_until_verified_again(
    scene: Scene,
) -> None:
    first = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(first)
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        assert verify(forge, BRIEF, verifier="gate:ci").passed
        second = scene.desk_commit({"NOTES.md": "more\n"}, message="after verify")
        main_before = scene.main_sha()
        with pytest.raises(MergeRefused) as refused:
            merge(forge, BRIEF)
        verdicts = {s.row: s.verdict for s in refused.value.decision.rows}
        assert verdicts == {"unit": Verdict.STALE, "lint": Verdict.STALE}
        assert refused.value.decision.head_sha == second
        assert "verified at " + first[:12] in refused.value.message
        assert scene.main_sha() == main_before

        report = verify(forge, BRIEF, verifier="gate:ci")
        assert report.passed and report.head_sha == second
        result = merge(forge, BRIEF)
        assert result.outcome is MergeOutcome.SQUASHED
        assert_squashed(scene, second, onto=main_before)


def test_the_gate_fingerprints_the_interpreter_its_rows_run(
    scene: Scene, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gate's own PATH finds another python3 than its sandboxed rows get (the sandbox
    # puts the supervisor's interpreter first). The gate must fingerprint the rows' one, or
    # it refuses a desk whose rows ran exactly what the gate's rows run.
    decoy = tmp_path / "decoy-bin"
    decoy.mkdir()
    (decoy / "python3").write_text("#!/bin/sh\necho Python 0.0.1\n")
    (decoy / "python3").chmod(0o755)
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    monkeypatch.setenv("PATH", os.pathsep.join([str(decoy), os.defpath]))
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        report = verify(forge, BRIEF, verifier="gate:ci")
    assert report.fingerprint["python"] == platform.python_version()
    assert report.env_problems == []
    assert report.passed


def test_a_different_lock_file_fails_with_a_readable_diff(
    scene: Scene, run_assay: AssayRunner
) -> None:
    desk_fp = {**scene.desk_fingerprint(), "lock:requirements.lock": "sha256:" + "ab" * 32}
    head = scene.desk_commit(
        {"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"}, env_fingerprint=desk_fp
    )
    scene.open_review(head)
    done = run_assay("verify", BRIEF, *_forge_args(scene), env=_env(scene))
    assert done.returncode == 1
    assert "environment differs from the declared one" in done.stdout
    assert f"lock:requirements.lock: desk sha256:{'ab' * 32} != gate sha256:" in done.stdout
    refused = run_assay("merge", BRIEF, *_forge_args(scene), "--json", env=_env(scene))
    assert refused.returncode == 1
    payload = json.loads(refused.stdout)
    assert (payload["status"], payload["code"]) == ("failed", 1)
    assert payload["decision"]["allowed"] is False
    assert {row["verdict"] for row in payload["decision"]["rows"]} == {"env mismatch"}
    assert "lock:requirements.lock: desk sha256:abab" in payload["message"]


def test_rows_come_from_main_not_from_the_branch(scene: Scene) -> None:
    weakened = (scene.author / "briefs" / "calc.md").read_text().replace("python3 check.py", "true")
    head = scene.desk_commit(
        {"calc.py": BAD, "briefs/calc.md": weakened}, claims={"unit": "pass", "lint": "pass"}
    )
    scene.open_review(head)
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        report = verify(forge, BRIEF, verifier="gate:ci")
    assert not report.passed
    assert report.ran[0].command == "python3 check.py"
    assert report.ran[0].exit == 1


def test_an_older_sha_can_be_verified_but_does_not_make_the_head_mergeable(scene: Scene) -> None:
    first = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.desk_commit({"NOTES.md": "x\n"})
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        report = verify(forge, BRIEF, sha=first[:10], verifier="gate:ci")
        assert report.head_sha == first
        assert report.passed
        decision = merge_decision(forge, BRIEF)
    assert not decision.allowed
    assert {s.verdict for s in decision.rows} == {Verdict.STALE}


def test_verify_without_a_review_or_branch_fails(scene: Scene, run_assay: AssayRunner) -> None:
    done = run_assay("verify", BRIEF, *_forge_args(scene), "--json", env=_env(scene))
    assert done.returncode == 1
    assert json.loads(done.stdout)["status"] == "failed"
    unknown = run_assay("verify", "nope", *_forge_args(scene), env=_env(scene))
    assert unknown.returncode == 65
    assert "no brief with id 'nope'" in unknown.stderr


def test_only_a_ready_review_merges(scene: Scene) -> None:
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        assert verify(forge, BRIEF, verifier="gate:ci").passed
        with pytest.raises(MergeRefused, match="there is no review to merge"):
            merge(forge, BRIEF)
        scene.open_review(head, state="draft")
        with pytest.raises(MergeRefused, match="the review is draft"):
            merge(forge, BRIEF)
        scene.open_review(head, state="ready")
        main_before = scene.main_sha()
        assert merge(forge, BRIEF).outcome is MergeOutcome.SQUASHED
        again = merge(forge, BRIEF)
    assert again.outcome is MergeOutcome.UP_TO_DATE
    assert_squashed(scene, head, onto=main_before)


def test_a_secret_a_row_prints_is_scrubbed_from_its_record(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-do-not-leak-42")
    scene.desk_commit(
        {"calc.py": GOOD + "print('tok-do-not-leak-42')\n"},
        claims={"unit": "pass", "lint": "pass"},
    )
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        report = verify(forge, BRIEF, verifier="gate:ci")
    unit = report.ran[0]
    assert "tok-do-not-leak-42" not in unit.output_tail
    assert "[redacted]" in unit.output_tail
    stored = json.dumps([json.loads(scene.git_show(c)) for c in scene.evidence_commits()])
    assert "tok-do-not-leak-42" not in stored


def test_a_review_whose_head_is_not_on_the_forge_fails(scene: Scene) -> None:
    scene.open_review("d" * 40)
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        with pytest.raises(Failed, match="is not on the forge"):
            verify(forge, BRIEF, verifier="gate:ci")
        with pytest.raises(Failed, match="is not on the forge"):
            merge(forge, BRIEF)


def test_main_that_moved_on_gets_a_clean_squash_or_a_refusal(scene: Scene) -> None:
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    scene.author_push({"CHANGES.md": "elsewhere\n"}, message="unrelated work on main")
    moved = scene.main_sha()
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        assert verify(forge, BRIEF, verifier="gate:ci").passed
        with pytest.raises(Failed, match="--ff-only"):
            merge(forge, BRIEF, ff_only=True)
        assert scene.main_sha() == moved
        result = merge(forge, BRIEF)
    assert result.outcome is MergeOutcome.SQUASHED
    merged = scene.main_sha()
    parents = git("--git-dir", str(scene.forge), "rev-list", "--parents", "-n1", "main").split()
    assert parents == [merged, moved]
    files = git("--git-dir", str(scene.forge), "ls-tree", "--name-only", "main").split()
    assert {"CHANGES.md", "calc.py"} <= set(files)
    assert ".assay" not in files


def test_a_conflicting_main_refuses_the_merge(scene: Scene) -> None:
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    scene.author_push({"calc.py": "def add(a, b):\n    return b + a\n"}, message="competing calc")
    moved = scene.main_sha()
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        assert verify(forge, BRIEF, verifier="gate:ci").passed
        with pytest.raises(Failed, match="does not merge cleanly"):
            merge(forge, BRIEF)
    assert scene.main_sha() == moved


def test_the_desk_can_render_the_current_table_for_its_review(scene: Scene) -> None:
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "fail"})
    scene.open_review(head)
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        before = review_table(forge, BRIEF)
        verify(forge, BRIEF, verifier="gate:ci")
        after = review_table(forge, BRIEF)
    assert "| lint | `test -f calc.py` | fail | — | — | missing |" in before
    assert "| lint | `test -f calc.py` | fail | pass | " in after
    assert after.startswith("Evidence: every row verified passing at")
    assert "not mergeable" in before.splitlines()[0]


def test_the_gate_works_the_same_over_smart_http(scene: Scene) -> None:
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    main_before = scene.main_sha()
    served = serve_http(scene.forge)
    try:
        with open_forge(served.url, cache_dir=scene.root / "http-cache") as forge:
            assert verify(forge, BRIEF, verifier="gate:ci").passed
            result = merge(forge, BRIEF)
    finally:
        served.stop()
    assert result.outcome is MergeOutcome.SQUASHED
    assert_squashed(scene, head, onto=main_before)
    assert len(scene.evidence_commits()) == 2
