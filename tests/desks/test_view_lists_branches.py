"""A desk's view lists other briefs' branches without fetching their objects (a view of 500
briefs fetched every brief's work tree and journal), and nothing that needs a branch's
objects goes without them: the journal of a waiting brief, the checkout of a claimed one,
and the claim's push that asserts the branch tip."""

from __future__ import annotations

import json
from pathlib import Path

from assay.branch import BranchSync
from assay.claims import ClaimStore
from assay.desks.records.state import read_view
from assay.forge import open_forge
from assay.journal import JournalWriter
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.desks.world import brief_text
from tests.forge_fixtures import put_on_main


def _branch_with_journal(forge_path: Path, tmp_path: Path, main: str) -> str:
    """``assay/b`` one commit past main, holding a one-line journal for ``b``."""
    journal = tmp_path / "journal"
    writer = JournalWriter.open(journal, run_id="run-1")
    writer.append({"kind": "start", "desk": "coder"})
    writer.close()
    files = {
        f".assay/journal/b/{path.name}": path.read_bytes()
        for path in journal.iterdir()
        if path.is_file()
    }
    with open_forge(str(forge_path), cache_dir=tmp_path / "writer-cache") as writer_forge:
        writer_forge.refresh(["refs/heads/main"])
        tip = writer_forge.commit(
            {**files, "work.txt": b"the work\n"},
            parents=[main],
            message="work",
            author=ASSAY_IDENTITY,
        )
        assert writer_forge.push([RefUpdate("refs/heads/assay/b", tip, expected=None)]).ok
    return tip


def test_a_view_lists_a_branch_and_reads_its_objects_only_when_needed(
    forge_path: Path, tmp_path: Path
) -> None:
    main = put_on_main(forge_path, {"briefs/b.md": brief_text("b")})
    tip = _branch_with_journal(forge_path, tmp_path, main)
    with open_forge(str(forge_path), cache_dir=tmp_path / "reader-cache") as forge:
        view = read_view(forge)
        assert view.branches["b"] == tip
        assert not forge.has_commit(tip)  # listed, not fetched
        assert "b" not in view.merged  # a tip the cache lacks is no ancestor of main
        journal = view.journal("b")  # a waiting brief's journal: fetched when asked for
        assert journal is not None and journal.entries[0]["kind"] == "start"
        assert forge.has_commit(tip)


def test_a_claim_asserting_a_listed_branch_checks_it_out(forge_path: Path, tmp_path: Path) -> None:
    main = put_on_main(forge_path, {"briefs/b.md": brief_text("b")})
    tip = _branch_with_journal(forge_path, tmp_path, main)
    with open_forge(str(forge_path), cache_dir=tmp_path / "reader-cache") as forge:
        view = read_view(forge)
        assert not forge.has_commit(tip)
        # The claim asserts the branch tip it saw, as the desk loop's claim does.
        claim = ClaimStore(forge).acquire(
            "b",
            "coder",
            lease_s=600,
            holder="h1",
            also=[RefUpdate("refs/heads/assay/b", tip, expected=tip)],
        )
        assert claim.record.state == "held"
        sync = BranchSync(forge, "b", workdir=tmp_path / "work", identity=ASSAY_IDENTITY)
        worktree = sync.checkout(known={"refs/heads/assay/b": tip, "refs/heads/main": view.main})
        assert (worktree / "work.txt").read_text() == "the work\n"
        assert sync.tip == tip
        claims = forge.refresh(["refs/assay/claims/b"])
        stored = json.loads(forge.read_blob(claims["refs/assay/claims/b"], "claim.json") or b"")
        assert stored["state"] == "held" and stored["holder"] == "h1"
