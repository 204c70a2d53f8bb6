"""Rules the merge checks itself, whatever desk did the work: approval and the sandbox.

The desk here is hostile (plain git: it pushes its work, its journal and a ready review
without ever waiting for anything), so only the gate's own rule stands between its
branch and main.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.desks.records.events import EventLog
from assay.errors import Corrupt
from assay.evidence.records import decode, encode, seal
from assay.forge import open_forge
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, BRIEF_TEXT, Scene, git, record
from tests.gatekeys import key_for

GOOD = "def add(a, b):\n    return a + b\n"
NEEDS_APPROVAL = BRIEF_TEXT.replace(
    "title: Add calc.add\n", "title: Add calc.add\napproval: true\n"
)


def _args(scene: Scene) -> list[str]:
    return ["--forge", str(scene.forge)]


def _env(scene: Scene) -> dict[str, str]:
    return {"ASSAY_STATE": str(scene.root / "state"), "ASSAY_VERIFIER": "ci"}


def _verified(scene: Scene, run_assay: AssayRunner, *flags: str) -> None:
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    done = run_assay("verify", BRIEF, *_args(scene), "--json", *flags, env=_env(scene))
    assert done.returncode == 0, done.stdout + done.stderr


def _answer(scene: Scene, kind: str, actor: str = "maintainer") -> None:
    with open_forge(str(scene.forge), cache_dir=scene.root / "person") as forge:
        EventLog(forge, BRIEF).append(kind, actor=actor, text="looked at it")


@pytest.mark.parametrize("label", [False, True])
def test_a_brief_that_needs_approval_never_merges_without_an_approve_event(
    tmp_path: Path, run_assay: AssayRunner, label: bool
) -> None:
    text = (
        BRIEF_TEXT.replace("title: Add calc.add\n", "title: Add calc.add\nlabels: [approval]\n")
        if label
        else NEEDS_APPROVAL
    )
    scene = Scene(tmp_path, brief_text=text)
    _verified(scene, run_assay)
    main_before = scene.main_sha()

    refused = run_assay("merge", BRIEF, *_args(scene), "--json", env=_env(scene))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    problems = json.loads(refused.stdout)["decision"]["problems"]
    assert problems == [
        "the brief needs approval and refs/assay/events/calc holds no approve event "
        "(assay approve calc)"
    ]
    assert scene.main_sha() == main_before

    # A signal is no answer; an approve is, and then the rows' evidence merges it.
    _answer(scene, "signal")
    assert run_assay("merge", BRIEF, *_args(scene), env=_env(scene)).returncode == 1
    _answer(scene, "approve")
    merged = run_assay("merge", BRIEF, *_args(scene), env=_env(scene))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert scene.main_sha() != main_before


def test_the_latest_answer_counts_so_a_rejection_after_an_approval_refuses(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = Scene(tmp_path, brief_text=NEEDS_APPROVAL)
    _verified(scene, run_assay)
    _answer(scene, "approve")
    _answer(scene, "reject", actor="lead")
    refused = run_assay("merge", BRIEF, *_args(scene), env=_env(scene))
    assert refused.returncode == 1
    assert "its latest answer is a rejection by lead" in refused.stderr
    _answer(scene, "approve", actor="lead")
    assert run_assay("merge", BRIEF, *_args(scene), env=_env(scene)).returncode == 0


def test_a_brief_without_approval_needs_no_event(tmp_path: Path, run_assay: AssayRunner) -> None:
    scene = Scene(tmp_path)
    _verified(scene, run_assay)
    assert run_assay("merge", BRIEF, *_args(scene), env=_env(scene)).returncode == 0


def test_rows_run_on_the_host_are_signed_as_such_and_merge_only_when_told(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = Scene(tmp_path)
    _verified(scene, run_assay, "--insecure-unsandboxed-rows")
    # The record says it under the gate's signature.
    raw = json.loads(
        git("--git-dir", str(scene.forge), "show", f"refs/assay/evidence/{BRIEF}:record.json")
    )
    assert raw["sandboxed"] is False
    main_before = scene.main_sha()

    refused = run_assay("merge", BRIEF, *_args(scene), "--json", env=_env(scene))
    assert refused.returncode == 1
    rows = {row["row"]: row for row in json.loads(refused.stdout)["decision"]["rows"]}
    assert {row["verdict"] for row in rows.values()} == {"unsandboxed"}
    assert "--allow-unsandboxed-evidence" in rows["unit"]["reason"]
    assert scene.main_sha() == main_before

    # Everything that shows the table says so too.
    status = run_assay("status", *_args(scene), "--json", env=_env(scene))
    assert status.returncode == 0, status.stderr
    [row] = [b for b in json.loads(status.stdout)["briefs"] if b["id"] == BRIEF]
    assert "unsandboxed 2" in json.dumps(row)

    merged = run_assay(
        "merge", BRIEF, *_args(scene), "--allow-unsandboxed-evidence", env=_env(scene)
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "pass, unsandboxed" in merged.stdout


KEY = key_for("gate")


def test_a_sandboxed_record_keeps_its_old_bytes_and_a_forged_flag_is_corrupt() -> None:
    # Records from before the field (every sandboxed row) keep their digest: the field is
    # written only for a host run, and only as false.
    sealed = seal(record(), prev="", key=KEY)
    assert "sandboxed" not in json.loads(encode(sealed))
    host = seal(record(sandboxed=False), prev="", key=KEY)
    assert json.loads(encode(host))["sandboxed"] is False
    assert decode(encode(host), source="r", key=KEY.public).sandboxed is False
    # Removing the flag from a signed host record breaks its digest.
    stripped = json.loads(encode(host))
    del stripped["sandboxed"]
    with pytest.raises(Corrupt, match="edited"):
        decode(json.dumps(stripped).encode(), source="r", key=KEY.public)
    forged = {**json.loads(encode(sealed)), "sandboxed": True}
    with pytest.raises(Corrupt, match="'sandboxed' must be false"):
        decode(json.dumps(forged).encode(), source="r", key=KEY.public)
