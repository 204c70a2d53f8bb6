"""The gate end to end on a real embedded forge: verify, merge, staleness, environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.evidence.gate import MergeOutcome, MergeRefused, merge, merge_decision, verify
from assay.evidence.rule import Verdict
from assay.evidence.table import BEGIN
from assay.forge import open_forge
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene

GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


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

    refused = run_assay("merge", BRIEF, *_forge_args(scene), env=_env(scene))
    assert refused.returncode == 1
    assert "row 'unit': failing: fail (exit 1)" in refused.stderr
    as_json = run_assay("merge", BRIEF, *_forge_args(scene), "--json", env=_env(scene))
    assert as_json.returncode == 1
    payload = json.loads(as_json.stdout)
    assert (payload["status"], payload["code"]) == ("failed", 1)
    assert payload["decision"]["allowed"] is False
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

    merged = run_assay("merge", BRIEF, *_forge_args(scene), "--json", env=_env(scene))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    result = json.loads(merged.stdout)
    assert result["outcome"] == "fast_forward"
    assert scene.main_sha() == head
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
        assert result.outcome is MergeOutcome.FAST_FORWARD
        assert scene.main_sha() == second


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
    refused = run_assay("merge", BRIEF, *_forge_args(scene), env=_env(scene))
    assert refused.returncode == 1
    assert "env mismatch" in refused.stderr
    assert "lock:requirements.lock: desk sha256:abab" in refused.stderr


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
        assert merge(forge, BRIEF).outcome is MergeOutcome.FAST_FORWARD
        again = merge(forge, BRIEF)
    assert again.outcome is MergeOutcome.UP_TO_DATE
    assert scene.main_sha() == head


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
