"""Tamper evidence: edited evidence records and edited or rewritten journals are CORRUPT."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from assay.errors import Corrupt
from assay.evidence.gate import MergeRefused, merge, verify
from assay.evidence.records import decode, encode, seal
from assay.evidence.rule import Verdict
from assay.evidence.store import append_records, fetch_log
from assay.forge import open_forge
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, git, record
from tests.gatekeys import key_for

GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"


def _replace_last_record(scene: Scene, data: bytes) -> None:
    """Rewrite the tip commit of the evidence ref with new record bytes (a hand edit)."""
    gd = ["--git-dir", str(scene.forge)]
    ref = f"refs/assay/evidence/{BRIEF}"
    tip = git(*gd, "rev-parse", ref)
    parent = git(*gd, "rev-parse", f"{tip}^")
    blob = git(*gd, "hash-object", "-w", "--stdin", input=data)
    tree = git(*gd, "mktree", input=f"100644 blob {blob}\trecord.json\n".encode())
    commit = git(*gd, "commit-tree", tree, "-p", parent, "-m", "edited")
    git(*gd, "update-ref", ref, commit)


def _last_record(scene: Scene) -> bytes:
    ref = f"refs/assay/evidence/{BRIEF}"
    return git("--git-dir", str(scene.forge), "show", f"{ref}:record.json").encode()


@pytest.fixture
def failed_scene(tmp_path: Path) -> Scene:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": BAD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        assert not verify(forge, BRIEF, verifier="gate:ci").passed
    return scene


def test_a_hand_edited_evidence_record_is_corrupt(
    failed_scene: Scene, run_assay: AssayRunner
) -> None:
    scene = failed_scene
    data = json.loads(_last_record(scene))
    assert data["row"] == "lint"
    first = git(
        "--git-dir", str(scene.forge), "rev-list", "--reverse", f"refs/assay/evidence/{BRIEF}"
    ).split()[0]
    unit = json.loads(git("--git-dir", str(scene.forge), "show", f"{first}:record.json"))
    unit["exit"] = 0
    data_first = json.dumps(unit).encode()
    gd = ["--git-dir", str(scene.forge)]
    blob = git(*gd, "hash-object", "-w", "--stdin", input=data_first)
    tree = git(*gd, "mktree", input=f"100644 blob {blob}\trecord.json\n".encode())
    root = git(*gd, "commit-tree", tree, "-m", "edited")
    tip_tree = git(*gd, "rev-parse", f"refs/assay/evidence/{BRIEF}^{{tree}}")
    tip = git(*gd, "commit-tree", tip_tree, "-p", root, "-m", "lint")
    git(*gd, "update-ref", f"refs/assay/evidence/{BRIEF}", tip)

    env = {"ASSAY_STATE": str(scene.root / "fresh-state")}
    for command in ("verify", "merge"):
        done = run_assay(command, BRIEF, "--forge", str(scene.forge), env=env)
        assert done.returncode == 6, done.stdout + done.stderr
        assert "edited" in done.stderr


def test_a_recomputed_chain_is_caught_by_the_tip_this_gate_saw(failed_scene: Scene) -> None:
    scene = failed_scene
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        log = fetch_log(forge, BRIEF)
    forged = seal(replace(log.records[-1], exit=0), prev=log.records[-1].prev, key=None)
    _replace_last_record(scene, encode(forged))
    with (
        open_forge(str(scene.forge), cache_dir=scene.cache) as forge,
        pytest.raises(Corrupt, match="rewritten"),
    ):
        fetch_log(forge, BRIEF)


def test_a_gate_key_catches_records_resealed_without_it(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": BAD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    key = key_for("gate-only")
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        verify(forge, BRIEF, verifier="gate:ci", key=key)
        log = fetch_log(forge, BRIEF, key=key.public)
    assert all(record.signed for record in log.records)
    tampered = json.loads(_last_record(scene))
    forged = decode(_last_record(scene), source="t")
    resealed = seal(replace(forged, seconds=0.5), prev=forged.prev, key=key_for("guessed"))
    assert json.loads(encode(resealed))["sig"] != tampered["sig"]
    _replace_last_record(scene, encode(resealed))
    with open_forge(str(scene.forge), cache_dir=tmp_path / "fresh-cache") as forge:
        last = fetch_log(forge, BRIEF, key=key.public).records[-1]
    # Re-signed by another key: it names that key, and does not count as the gate's.
    assert not last.signed and last.signer == key_for("guessed").public.fingerprint
    # Re-signed under the gate's fingerprint without its key: a forgery.
    claimed = {**json.loads(encode(resealed))}
    claimed["sig"] = claimed["sig"].replace(
        key_for("guessed").public.fingerprint, key.public.fingerprint
    )
    _replace_last_record(scene, json.dumps(claimed).encode())
    with (
        open_forge(str(scene.forge), cache_dir=tmp_path / "fresh-cache-2") as forge,
        pytest.raises(Corrupt, match="signature"),
    ):
        fetch_log(forge, BRIEF, key=key.public)


def test_rows_the_desk_wrote_never_count(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": BAD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)  # the claim names the desk "coder" (the scene claimed the brief)
    main_before = scene.main_sha()
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        fake = [
            record(
                brief=BRIEF,
                row=row,
                command=command,
                head_sha=head,
                env_fingerprint=scene.desk_fingerprint(),
                verifier=verifier,
            )
            for row, command, verifier in (
                ("unit", "python3 check.py", "gate:coder"),
                ("lint", "test -f calc.py", "desk:coder"),
            )
        ]
        append_records(forge, BRIEF, fake)
        with pytest.raises(MergeRefused) as refused:
            merge(forge, BRIEF)
    assert {s.verdict for s in refused.value.decision.rows} == {Verdict.MISSING}
    assert scene.main_sha() == main_before


def test_an_edited_journal_is_corrupt_at_verify_and_merge(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = Scene(tmp_path)
    scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    segment = scene.desk / ".assay" / "journal" / BRIEF / "000001.jsonl"
    segment.write_text(segment.read_text().replace('"result":"pass"', '"result":"PASS"', 1))
    git("commit", "--quiet", "-am", "edit the journal", cwd=scene.desk)
    git("push", "--quiet", "origin", f"assay/{BRIEF}", cwd=scene.desk)
    head = git("rev-parse", "HEAD", cwd=scene.desk)
    scene.open_review(head)
    env = {"ASSAY_STATE": str(scene.root / "state")}
    for command in ("verify", "merge"):
        done = run_assay(command, BRIEF, "--forge", str(scene.forge), env=env)
        assert done.returncode == 6, done.stdout + done.stderr


def test_a_journal_rewritten_wholesale_after_verification_is_corrupt(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    first = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(first)
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        assert verify(forge, BRIEF, verifier="gate:ci").passed
    shutil.rmtree(scene.desk / ".assay" / "journal" / BRIEF)
    # A fresh, internally consistent journal with a different story (a valid chain).
    scene.desk_commit({"NOTES.md": "new history\n"}, claims={"unit": "pass"})
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        with pytest.raises(Corrupt, match="journal was rewritten"):
            verify(forge, BRIEF, verifier="gate:ci")
        with pytest.raises(Corrupt, match="journal was rewritten"):
            merge(forge, BRIEF)


def test_two_gates_appending_at_once_chain_one_after_the_other(failed_scene: Scene) -> None:
    scene = failed_scene
    with (
        open_forge(str(scene.forge), cache_dir=scene.root / "cache-a") as gate_a,
        open_forge(str(scene.forge), cache_dir=scene.root / "cache-b") as gate_b,
    ):
        stale = fetch_log(gate_a, BRIEF)
        template = stale.records[-1]
        append_records(gate_b, BRIEF, [replace(template, verifier="gate:b")])
        # gate A still holds the log from before B's append: its push loses, it re-reads
        # and chains after B's record instead of replacing it.
        after = append_records(gate_a, BRIEF, [replace(template, verifier="gate:a")], log=stale)
    assert [r.verifier for r in after.records][-2:] == ["gate:b", "gate:a"]
    with open_forge(str(scene.forge), cache_dir=scene.root / "cache-c") as reader:
        log = fetch_log(reader, BRIEF)
    assert [r.digest for r in log.records] == [r.digest for r in after.records]
    assert len(scene.evidence_commits()) == 4
