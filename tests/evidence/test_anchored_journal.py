"""Attack: the branch's journal rewritten (chain recomputed) or cut short before the gate runs.

The desk works as a desk does: it claims the brief, pushes its journal, anchors each pushed
head on the claim (renewals), and settles the claim at the final head. Then an attacker with
push access replaces the journal on the branch with one that is internally valid (every
``sum``/``prev`` recomputed) but differs: an edited model output, the last 1, 3 or 10 lines
dropped, the last segment deleted. Nothing about the gate's own records can tell (it has
none yet); the claim's anchors can, and ``verify``, ``merge`` and ``history --brief`` say
``corrupt`` (exit 6) while main stays where it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from assay.claims import ClaimStore
from assay.forge import open_forge
from assay.journal import JournalWriter, read_journal
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, append_claimed, git

GOOD = "def add(a, b):\n    return a + b\n"
MODEL_CALLS = 6


def _entries() -> list[dict[str, Any]]:
    """A run's story: start, model calls with usage, the evidence claim, end."""
    story: list[dict[str, Any]] = [{"kind": "start", "desk": "coder"}]
    for call in range(MODEL_CALLS):
        story.append(
            {
                "kind": "step",
                "step": "model",
                "pos": call,
                "status": "ok",
                "out": {"value": {"text": f"call {call}", "usage": {"in": 900, "out": 90}}},
            }
        )
        story.append({"kind": "step", "step": "tool", "pos": call, "status": "ok", "out": {}})
    return story


def _write(journal_dir: Path, entries: list[dict[str, Any]], claimed: bool = True) -> None:
    writer = JournalWriter.open(journal_dir, run_id="run-1", segment_bytes=600)
    try:
        for entry in entries:
            writer.append(dict(entry))
        if claimed:
            append_claimed(writer, {"unit": "pass"}, {})
            writer.append({"kind": "end", "status": "done"})
    finally:
        writer.close()


BRIEF_TEXT = """---
id: calc
title: Add calc.add
verify:
  - id: unit
    run: python3 check.py
---
Add a function add(a, b) to calc.py.
"""


def _push(scene: Scene, message: str) -> str:
    git("add", "-A", cwd=scene.desk)
    git("commit", "--quiet", "-m", message, cwd=scene.desk)
    git("push", "--quiet", "--force", "origin", f"assay/{BRIEF}", cwd=scene.desk)
    return git("rev-parse", "HEAD", cwd=scene.desk)


@pytest.fixture
def settled(tmp_path: Path) -> Scene:
    """An honest run: claimed, journal pushed in two halves (each anchored), settled done."""
    scene = Scene(tmp_path, brief_text=BRIEF_TEXT)
    journal_dir = scene.desk / ".assay" / "journal" / BRIEF
    (scene.desk / "calc.py").write_text(GOOD)
    with open_forge(str(scene.forge), cache_dir=tmp_path / "desk-cache") as forge:
        store = ClaimStore(forge)
        claim = store.acquire(BRIEF, "coder", lease_s=600)
        story = _entries()
        _write(journal_dir, story[:5], claimed=False)
        _push(scene, "first half")
        store.renew(claim, journal_head=read_journal(journal_dir).head)
        shutil.rmtree(journal_dir)
        _write(journal_dir, story)
        head = _push(scene, "the rest")
        store.renew(claim, journal_head=read_journal(journal_dir).head)
        store.release(claim, done=True)
    assert len(read_journal(journal_dir).segments) > 2
    scene.open_review(head)
    return scene


def _replace_journal(scene: Scene, entries: list[dict[str, Any]], *, claimed: bool) -> str:
    journal_dir = scene.desk / ".assay" / "journal" / BRIEF
    shutil.rmtree(journal_dir)
    _write(journal_dir, entries, claimed=claimed)
    head = _push(scene, "rewritten journal")
    scene.open_review(head)
    return head


def _refused(scene: Scene, run_assay: AssayRunner) -> None:
    main_before = scene.main_sha()
    for command in ("verify", "merge"):
        done = run_assay(command, BRIEF, "--forge", str(scene.forge))
        assert done.returncode == 6, command + ": " + done.stdout + done.stderr
        assert "journal" in done.stderr and BRIEF in done.stderr
    assert scene.main_sha() == main_before


def test_the_honest_run_verifies_and_merges(settled: Scene, run_assay: AssayRunner) -> None:
    assert run_assay("verify", BRIEF, "--forge", str(settled.forge)).returncode == 0
    done = run_assay("merge", BRIEF, "--forge", str(settled.forge))
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_edited_model_output_with_the_chain_recomputed_is_corrupt(
    settled: Scene, run_assay: AssayRunner
) -> None:
    story = _entries()
    story[3]["out"] = {"value": {"text": "call 1, edited", "usage": {"in": 1, "out": 1}}}
    _replace_journal(settled, story, claimed=True)
    _refused(settled, run_assay)


@pytest.mark.parametrize("dropped", [1, 3, 10])
def test_a_journal_cut_short_is_corrupt(
    settled: Scene, run_assay: AssayRunner, dropped: int
) -> None:
    journal_dir = settled.desk / ".assay" / "journal" / BRIEF
    full = read_journal(journal_dir).entries
    keep = [
        {k: v for k, v in entry.items() if k not in ("v", "seq", "prev", "run", "fence", "sum")}
        for entry in full[: len(full) - dropped]
        if entry["kind"] != "continue"
    ]
    _replace_journal(settled, keep, claimed=False)
    assert len(read_journal(journal_dir).entries) < len(full)
    _refused(settled, run_assay)


def test_a_deleted_last_segment_is_corrupt_for_the_gate_and_history(
    settled: Scene, run_assay: AssayRunner
) -> None:
    journal_dir = settled.desk / ".assay" / "journal" / BRIEF
    last = read_journal(journal_dir).segments[-1]
    (journal_dir / last).unlink()
    head = _push(settled, "drop the last segment")
    settled.open_review(head)
    _refused(settled, run_assay)
    done = run_assay("history", "--brief", BRIEF, "--forge", str(settled.forge))
    assert done.returncode == 6, done.stdout + done.stderr
    assert "settled" in done.stderr


def test_the_board_and_status_name_the_cut_journal(settled: Scene, run_assay: AssayRunner) -> None:
    journal_dir = settled.desk / ".assay" / "journal" / BRIEF
    (journal_dir / read_journal(journal_dir).segments[-1]).unlink()
    _push(settled, "drop the last segment")
    done = run_assay("status", "--forge", str(settled.forge), "--json")
    assert done.returncode == 0, done.stderr
    assert "rewritten or truncated" in done.stdout
    done = run_assay("board", "--forge", str(settled.forge), cwd=settled.root)
    assert done.returncode == 0, done.stderr
    assert "rewritten or truncated" in (settled.root / "BOARD.md").read_text()


def test_a_rewritten_journal_whose_claim_was_deleted_is_refused_not_passed(
    settled: Scene, run_assay: AssayRunner
) -> None:
    # With the claim ref gone there are no anchors left to miss: the gate must refuse the
    # missing record itself, or a re-chained journal merges.
    story = _entries()
    story[3]["out"] = {"value": {"text": "call 1, edited", "usage": {"in": 1, "out": 1}}}
    _replace_journal(settled, story, claimed=True)
    git("--git-dir", str(settled.forge), "update-ref", "-d", f"refs/assay/claims/{BRIEF}")
    _refused(settled, run_assay)
    done = run_assay("merge", BRIEF, "--forge", str(settled.forge))
    assert f"refs/assay/claims/{BRIEF} is missing" in done.stderr


def test_a_desk_that_never_claimed_the_brief_is_refused(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = Scene(tmp_path, brief_text=BRIEF_TEXT, claims=False)
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass"})
    scene.open_review(head)
    _refused(scene, run_assay)


def test_a_claim_still_held_vouches_for_nothing_yet(tmp_path: Path, run_assay: AssayRunner) -> None:
    scene = Scene(tmp_path, brief_text=BRIEF_TEXT, claims=False)
    with open_forge(str(scene.forge), cache_dir=tmp_path / "desk-cache") as forge:
        store = ClaimStore(forge)
        claim = store.acquire(BRIEF, "coder", lease_s=600)
        head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass"})
        store.renew(claim, journal_head=read_journal(scene.desk / ".assay/journal/calc").head)
    scene.open_review(head)
    _refused(scene, run_assay)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge))
    assert "the claim is held, not settled" in done.stderr
