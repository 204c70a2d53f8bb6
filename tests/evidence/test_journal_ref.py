"""The gate on a run whose checkpoints are on the journal ref and whose branch is its code.

The desk writes as a desk does (``BranchSync``: one atomic push of the journal ref and the
branch per durability point). The gate verifies the branch's tip, a code commit holding no
``.assay/``, reads the journal at the checkpoint whose code it is, binds its evidence to the
code commit, keeps the checkpoints under the run ref and squashes the code onto main. A
branch whose code no checkpoint holds is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.branch import BranchSync
from assay.claims import Claim, ClaimStore
from assay.errors import Corrupt, Failed
from assay.evidence.fingerprint import fingerprint
from assay.evidence.gate import MergeOutcome, merge, verify
from assay.forge import Forge, open_forge
from assay.journal import JournalWriter, read_journal
from assay.plumbing import Identity, RefUpdate
from assay.refs import journal_ref
from tests.evidence.gatekit import BRIEF, Scene, append_claimed, git

GOOD = "def add(a, b):\n    return a + b\n"
JOURNAL = journal_ref(BRIEF)
BRANCH = f"refs/heads/assay/{BRIEF}"


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


def _journal(sync: BranchSync, *entries: dict[str, object], claimed: bool = False) -> str:
    """Append ``entries`` (and the evidence claim) to the work tree's journal; its head."""
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


def _run(scene: Scene, forge: Forge) -> tuple[BranchSync, ClaimStore, Claim]:
    """A desk's run: the claim, a code step and a checkpoint that changes only the journal,
    the claim settled at the pushed head (waiting for the gate)."""
    store = ClaimStore(forge)
    claim = store.set_waiting(store.acquire(BRIEF, "coder", lease_s=600), "gate")
    sync = BranchSync(
        forge, BRIEF, workdir=scene.root / "work", identity=Identity.for_holder("coder", "h1")
    )
    work = sync.checkout()
    (work / "calc.py").write_text(GOOD)
    _journal(sync, {"kind": "step", "step": "tool", "pos": 0, "status": "ok", "out": {}})
    sync.sync(f"{BRIEF}: tool")
    head = _journal(sync, claimed=True)
    sync.sync(f"{BRIEF}: model")
    return sync, store, store.renew(claim, journal_head=head)


def test_the_gate_verifies_the_code_and_keeps_the_checkpoints_under_the_run_ref(
    scene: Scene,
) -> None:
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        sync, _store, _claim = _run(scene, forge)
        code, checkpoint = scene.ref(BRANCH), scene.ref(JOURNAL)
        assert code == sync.tip and checkpoint == sync.checkpoint and code != checkpoint
        gd = ["--git-dir", str(scene.forge)]
        assert git(*gd, "ls-tree", "-r", "--name-only", BRANCH, ".assay") == ""
        assert git(*gd, "rev-list", "--count", f"main..{BRANCH}") == "1"
        assert git(*gd, "rev-list", "--count", f"main..{JOURNAL}") == "2"
        scene.open_review(str(code))
        report = verify(forge, BRIEF, verifier="gate:ci")
        assert report.passed, report.decision.blocking()
        assert report.head_sha == code
        assert {record.head_sha for record in report.ran} == {code}
        assert report.ran[0].journal_head == read_journal(sync.journal_dir).head
        main_before = scene.main_sha()
        result = merge(forge, BRIEF)
    assert result.outcome is MergeOutcome.SQUASHED and result.head_sha == code
    assert result.run is not None and scene.ref(result.run) == checkpoint
    assert git(*gd, "ls-tree", "-r", "--name-only", result.run, f".assay/journal/{BRIEF}")
    assert git(*gd, "ls-tree", "-r", "--name-only", "main", ".assay") == ""
    assert git(*gd, "rev-list", "--parents", "-n1", "main").split()[1:] == [main_before]
    assert git(*gd, "show", "main:calc.py") == GOOD.rstrip("\n")


def test_a_journal_grown_after_verify_at_the_same_code_keeps_its_evidence(
    scene: Scene,
) -> None:
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        sync, store, claim = _run(scene, forge)
        code = scene.ref(BRANCH)
        scene.open_review(str(code))
        assert verify(forge, BRIEF, verifier="gate:ci").passed
        # A model call after the verdict moves the journal ref alone: the code is the same.
        grown = _journal(sync, {"kind": "step", "step": "tool", "pos": 1, "status": "ok"})
        assert sync.sync(f"{BRIEF}: model") == code
        store.renew(claim, journal_head=grown)
        result = merge(forge, BRIEF)
    assert result.outcome is MergeOutcome.SQUASHED and result.head_sha == code
    assert result.run is not None and scene.ref(result.run) == scene.ref(JOURNAL)


def test_a_branch_whose_code_no_checkpoint_holds_is_refused(scene: Scene) -> None:
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        sync, _store, _claim = _run(scene, forge)
        code = scene.ref(BRANCH)
        assert code is not None
        # Code pushed to the branch alone (no checkpoint of it): what would it be judged by?
        tree = forge.tree_with(code, "calc.py", b"def add(a, b):\n    return 4\n")
        forged = forge.commit_tree(tree, parents=[code], message="forged", author=sync.identity)
        assert forge.push([RefUpdate(BRANCH, forged, expected=code)]).ok
        scene.open_review(forged)
        main_before = scene.main_sha()
        with pytest.raises(Failed, match="no checkpoint on refs/assay/journal/calc holds"):
            verify(forge, BRIEF, verifier="gate:ci")
        with pytest.raises(Failed, match="the branch and its journal disagree"):
            merge(forge, BRIEF)
    assert scene.main_sha() == main_before


def test_a_deleted_journal_ref_refuses_the_merge(scene: Scene) -> None:
    # On GitHub any job with contents: write may delete a custom ref: the gate fails closed.
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        _sync, _store, _claim = _run(scene, forge)
        code = scene.ref(BRANCH)
        scene.open_review(str(code))
        assert verify(forge, BRIEF, verifier="gate:ci").passed
        assert forge.push([RefUpdate(JOURNAL, None, expected=scene.ref(JOURNAL))]).ok
        main_before = scene.main_sha()
        with pytest.raises(Corrupt, match="is gone: the journal was rewritten"):
            merge(forge, BRIEF)
    assert scene.main_sha() == main_before
