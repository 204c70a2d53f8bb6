"""Segments at the default size, committed to a real forge checkpoint by checkpoint: a
rolled segment never changes again (its git blob is the same in every later commit), so a
checkpoint rewrites at most the one small active segment."""

from __future__ import annotations

import subprocess
from pathlib import Path

from assay.branch import BranchSync
from assay.forge import Forge
from assay.journal import DEFAULT_SEGMENT_BYTES, JournalWriter, read_journal
from assay.plumbing import Identity

ME = Identity.for_holder("coder", "h1")
LINE_PAD = 3000  # about the size of a model step's lines with a tool output inline


def _segments(work: Path, commit: str, journal: str) -> dict[str, str]:
    """``{segment name: git blob id}`` of the journal in ``commit``."""
    listing = subprocess.run(
        ["git", "ls-tree", commit, f"{journal}/"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    found = {}
    for row in listing.splitlines():
        meta, name = row.split("\t")
        if name.endswith(".jsonl"):
            found[name.rsplit("/", 1)[1]] = meta.split()[2]
    return found


def test_the_default_segment_is_small() -> None:
    # a checkpoint rewrites the active segment: it must stay a small file (docs/journal.md)
    assert 64 * 1024 <= DEFAULT_SEGMENT_BYTES <= 256 * 1024


def test_rolled_segments_are_byte_identical_in_every_later_checkpoint(
    forge: Forge, tmp_path: Path
) -> None:
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    work = sync.checkout()
    journal = sync.journal_dir.relative_to(work).as_posix()
    commits = []
    pos = 0
    with JournalWriter.open(sync.journal_dir, run_id="r", fsync=False) as writer:
        while len(list(sync.journal_dir.glob("*.jsonl"))) < 3:
            for _ in range(5):  # a few lines a checkpoint, as a step's intent and result
                pos += 1
                writer.append(
                    {"kind": "step", "pos": pos, "status": "ok", "out": {"value": "x" * LINE_PAD}}
                )
            writer.sync()
            sync.sync(f"step {pos}")
            commits.append(str(sync.checkpoint))  # the journal's commit: the checkpoint
    seen: dict[str, str] = {}  # a rolled segment's blob id, from the first commit after its roll
    for commit in commits:
        segments = _segments(work, commit, journal)
        active = max(segments)
        for name, blob in segments.items():
            if name != active:
                assert seen.setdefault(name, blob) == blob, f"{name} changed after it rolled"
        size = len(
            subprocess.run(
                ["git", "cat-file", "blob", segments[active]],
                cwd=work,
                capture_output=True,
                check=True,
                timeout=60,
            ).stdout
        )
        assert size <= DEFAULT_SEGMENT_BYTES + 6 * (LINE_PAD + 400)
    assert len(seen) == 2
    entries = read_journal(sync.journal_dir).entries
    assert [e["kind"] for e in entries].count("continue") == 2
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
