"""A merged brief's run is read back from its run ref (``refs/assay/runs/<brief>/<n>``).

After the merge, a sweep or a job may delete the brief's journal ref and its branch: main
holds only the squashed code, so the run must be read where the merge kept it. The gate
(judging the brief again), ``assay history --brief`` and ``assay replay``'s read, the
board's row and its run page, ``assay status`` and resync all find it there, every step.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from assay.board.runs import build_run_pages
from assay.branch import BranchSync
from assay.claims import ClaimStore
from assay.desks.host.resync import resync_table
from assay.evidence.anchors import anchored_branch_journal
from assay.evidence.fingerprint import fingerprint
from assay.evidence.gate import MergeOutcome, merge, verify
from assay.forge import open_forge
from assay.forgestate.rows import collect_snapshot
from assay.journal import JournalWriter, read_journal
from assay.plumbing import Identity
from assay.refs import branch_ref, journal_ref
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, append_claimed, git

JOURNAL, BRANCH = journal_ref(BRIEF), branch_ref(BRIEF)


def _entries(sync: BranchSync, *entries: dict[str, object], claimed: bool = False) -> str:
    writer = JournalWriter.open(sync.journal_dir, run_id="run-1")
    try:
        if writer.seq == 0:
            writer.append({"kind": "start", "desk": "coder"})
        for entry in entries:
            writer.append(dict(entry))
        if claimed:
            declared = {"python": "3", "lock": "requirements.lock"}
            append_claimed(
                writer, {"unit": "pass", "lint": "pass"}, fingerprint(declared, sync.workdir)
            )
    finally:
        writer.close()
    return read_journal(sync.journal_dir).head


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scene, int, str]:
    """A run the gate verified and merged; then its journal ref deleted and, once the gate
    judged it again, its branch: (scene, the journal's entries, the run ref)."""
    scene = Scene(tmp_path_factory.mktemp("merged"))
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        store = ClaimStore(forge)
        claim = store.set_waiting(store.acquire(BRIEF, "coder", lease_s=600), "gate")
        sync = BranchSync(
            forge, BRIEF, workdir=scene.root / "work", identity=Identity.for_holder("coder", "h")
        )
        (sync.checkout() / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        _entries(sync, {"kind": "step", "step": "tool", "pos": 0, "status": "ok", "out": {}})
        sync.sync(f"{BRIEF}: tool")
        store.renew(claim, journal_head=_entries(sync, claimed=True))
        sync.sync(f"{BRIEF}: model")
        scene.open_review(str(scene.ref(BRANCH)))
        assert verify(forge, BRIEF, verifier="gate:ci").passed
        result = merge(forge, BRIEF)
        assert result.outcome is MergeOutcome.SQUASHED and result.run is not None
        assert scene.ref(result.run) == scene.ref(JOURNAL)
        git("--git-dir", str(scene.forge), "update-ref", "-d", JOURNAL)
        # The gate judges the merged brief from its run ref: nothing to merge, nothing lost
        # (without it the journal would read empty, its anchors gone: Corrupt).
        assert merge(forge, BRIEF).outcome is MergeOutcome.UP_TO_DATE
        git("--git-dir", str(scene.forge), "update-ref", "-d", BRANCH)
    entries = len(read_journal(sync.journal_dir).entries)
    return scene, entries, result.run


def test_history_and_replay_read_every_step_from_the_run_ref(
    merged: tuple[Scene, int, str], run_assay: AssayRunner
) -> None:
    scene, entries, run = merged
    assert scene.ref(JOURNAL) is None and scene.ref(BRANCH) is None
    done = run_assay("history", "--brief", BRIEF, "--forge", str(scene.forge), "--json")
    assert done.returncode == 0, done.stderr
    shown = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(shown) == entries and shown[-1]["kind"] == "step"
    with (
        open_forge(str(scene.forge), cache_dir=scene.root / "reader") as forge,
        tempfile.TemporaryDirectory() as scratch,
    ):
        tip, journal = anchored_branch_journal(forge, BRIEF, Path(scratch))  # replay's read
    assert tip == scene.ref(run) and len(journal.entries) == entries


def test_the_board_status_and_resync_show_the_merged_run(
    merged: tuple[Scene, int, str], run_assay: AssayRunner
) -> None:
    scene, entries, run = merged
    with open_forge(str(scene.forge), cache_dir=scene.root / "board") as forge:
        snapshot, board = collect_snapshot(forge)
        assert snapshot.checkpoint(BRIEF) == snapshot.run(BRIEF) == scene.ref(run)
        (row,) = [row for row in board.rows if row.id == BRIEF]
        assert row.state == "merged" and row.steps > 0 and not row.status_note
        with tempfile.TemporaryDirectory() as scratch:
            (page,) = build_run_pages(forge, snapshot, board, Path(scratch))
        assert page.row.id == BRIEF and not page.problem
        assert len([line for line in page.lines if line.row.seq]) == entries
        (resynced,) = [state for state in resync_table(forge) if state.brief == BRIEF]
    assert (resynced.state, resynced.steps, resynced.problem) == ("merged", row.steps, "")
    done = run_assay("status", "--forge", str(scene.forge), "--json")
    assert done.returncode == 0, done.stderr
    (shown,) = [b for b in json.loads(done.stdout)["briefs"] if b["id"] == BRIEF]
    assert shown["steps"] == row.steps and shown["state"] == "merged"
