"""The fanned-out blob layout (``blobs/ab/<rest>``), and journals of the old flat layout.

Attack tests first: a blob moved to a folder other than its own, or swapped for another
blob's bytes, is corrupt; then both layouts (and a journal holding both) read and verify,
from a directory and from a commit on a real forge.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from assay.branch import BranchSync, read_branch_journal
from assay.errors import Corrupt
from assay.forge import Forge
from assay.journal import JournalWriter, read_journal
from assay.journal.blobs import BlobStore, blob_path, flat_blob_path
from assay.plumbing import Identity

ME = Identity.for_holder("coder", "h1")


def _write(directory: Path, payloads: list[object], *, flat: bool = False) -> list[str]:
    """A journal of one step line per payload, each payload a blob the line lists."""
    refs = []
    with JournalWriter.open(directory, run_id="r") as writer:
        if flat:
            writer.blobs = BlobStore(directory, flat=True)
        for pos, payload in enumerate(payloads, start=1):
            ref = writer.put_blob(payload)
            writer.append(
                {"kind": "step", "pos": pos, "status": "ok", "out": {"blob": ref}, "blobs": [ref]}
            )
            refs.append(ref)
    return refs


# ------------------------------------------------------------------------ attacks


def test_a_blob_moved_to_another_fanout_folder_is_missing(tmp_path: Path) -> None:
    (ref,) = _write(tmp_path, [{"big": "x" * 5000}])
    right = blob_path(tmp_path, ref)
    other = "00" if right.parent.name != "00" else "01"
    wrong = right.parent.parent / other / right.name
    wrong.parent.mkdir()
    right.rename(wrong)
    with pytest.raises(Corrupt, match=r"000001\.jsonl line 1: blob sha256:[0-9a-f]+ is missing"):
        read_journal(tmp_path)


def test_another_blobs_bytes_at_a_fanout_path_do_not_match_its_hash(tmp_path: Path) -> None:
    first, second = _write(tmp_path, [{"a": "x" * 5000}, {"b": "y" * 5000}])
    blob_path(tmp_path, first).write_bytes(blob_path(tmp_path, second).read_bytes())
    with pytest.raises(
        Corrupt, match=r"000001\.jsonl line 1: blob sha256:[0-9a-f]+ does not match"
    ):
        read_journal(tmp_path)


def test_a_flat_blob_that_was_changed_is_corrupt_too(tmp_path: Path) -> None:
    (ref,) = _write(tmp_path, [{"big": "x" * 5000}], flat=True)
    flat_blob_path(tmp_path, ref).write_bytes(b'{"big":"forged"}')
    with pytest.raises(Corrupt, match="does not match its hash"):
        read_journal(tmp_path)


# ---------------------------------------------------------------------- layouts


def test_blobs_are_written_under_two_hex_digit_folders(tmp_path: Path) -> None:
    refs = _write(tmp_path, [{"n": n, "pad": "x" * 3000} for n in range(20)])
    root = tmp_path / "blobs"
    folders = sorted(p.name for p in root.iterdir())
    assert all(
        len(name) == 2 and p.is_dir()
        for name, p in zip(folders, sorted(root.iterdir()), strict=True)
    )
    for ref in refs:
        hexpart = ref.removeprefix("sha256:")
        assert (root / hexpart[:2] / hexpart[2:]).is_file()
        assert not (root / hexpart).exists()
    journal = read_journal(tmp_path)
    assert [journal.load(ref)["n"] for ref in refs] == list(range(20))


def test_an_old_flat_journal_reads_and_a_resumed_writer_keeps_its_blobs(tmp_path: Path) -> None:
    old = _write(tmp_path, [{"old": n, "pad": "x" * 3000} for n in range(3)], flat=True)
    assert all(flat_blob_path(tmp_path, ref).is_file() for ref in old)
    assert read_journal(tmp_path).load(old[1])["old"] == 1
    with JournalWriter.open(tmp_path) as writer:  # the old run resumed by this Assay
        again = writer.put_blob({"old": 0, "pad": "x" * 3000})
        new = writer.put_blob({"new": 1, "pad": "y" * 3000})
        writer.append(
            {"kind": "step", "pos": 4, "status": "ok", "out": {"blob": new}, "blobs": [new]}
        )
    assert again == old[0] and not blob_path(tmp_path, again).exists()  # stored once
    assert blob_path(tmp_path, new).is_file() and not flat_blob_path(tmp_path, new).exists()
    journal = read_journal(tmp_path)
    assert [journal.load(r) for r in (old[2], new)] == [
        {"old": 2, "pad": "x" * 3000},
        {"new": 1, "pad": "y" * 3000},
    ]


@pytest.mark.parametrize("flat", [False, True])
def test_a_committed_journal_of_either_layout_reads_back_from_the_forge(
    forge: Forge, tmp_path: Path, flat: bool
) -> None:
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    sync.checkout()
    refs = _write(sync.journal_dir, [{"n": n, "pad": "z" * 3000} for n in range(4)], flat=flat)
    sync.sync("step")
    tip = str(sync.checkpoint)  # the checkpoint holds the journal; the branch, the code
    names = forge.list_tree(tip, ".assay/journal/b1")
    hexes = [ref.removeprefix("sha256:") for ref in refs]
    expected = [f"blobs/{h}" if flat else f"blobs/{h[:2]}/{h[2:]}" for h in hexes]
    assert {f".assay/journal/b1/{name}" for name in expected} <= set(names)
    shutil.rmtree(sync.journal_dir)
    journal = read_branch_journal(forge, tip, "b1", tmp_path / "read")
    assert journal is not None
    assert [journal.load(ref)["n"] for ref in refs] == [0, 1, 2, 3]
