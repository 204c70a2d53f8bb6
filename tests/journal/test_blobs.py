"""The fanned-out blob layout (``blobs/a/b/<rest>``), and journals of the older layouts
(``blobs/ab/<rest>``, and the flat ``blobs/<hex>``).

Attack tests first: a blob moved to a folder other than its own, or swapped for another
blob's bytes, is corrupt; then every layout (and a journal holding several) reads and
verifies, from a directory and from a commit on a real forge.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from assay.branch import BranchSync, read_branch_journal
from assay.errors import Corrupt
from assay.forge import Forge
from assay.journal import JournalWriter, read_journal
from assay.journal.blobs import BlobStore, Layout, blob_path
from assay.plumbing import Identity

ME = Identity.for_holder("coder", "h1")


def _write(
    directory: Path, payloads: list[object], *, layout: Layout = Layout.NIBBLES
) -> list[str]:
    """A journal of one step line per payload, each payload a blob the line lists."""
    refs = []
    with JournalWriter.open(directory, run_id="r") as writer:
        if layout is not Layout.NIBBLES:
            writer.blobs = BlobStore(directory, layout=layout)
        for pos, payload in enumerate(payloads, start=1):
            ref = writer.put_blob(payload)
            writer.append(
                {"kind": "step", "pos": pos, "status": "ok", "out": {"blob": ref}, "blobs": [ref]}
            )
            refs.append(ref)
    return refs


# ------------------------------------------------------------------------ attacks


@pytest.mark.parametrize("layout", [Layout.NIBBLES, Layout.BYTE])
def test_a_blob_moved_to_another_fanout_folder_is_missing(tmp_path: Path, layout: Layout) -> None:
    (ref,) = _write(tmp_path, [{"big": "x" * 5000}], layout=layout)
    right = blob_path(tmp_path, ref, layout)
    width = len(right.parent.name)
    other = "0" * width if right.parent.name != "0" * width else "1" * width
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
    (ref,) = _write(tmp_path, [{"big": "x" * 5000}], layout=Layout.FLAT)
    blob_path(tmp_path, ref, Layout.FLAT).write_bytes(b'{"big":"forged"}')
    with pytest.raises(Corrupt, match="does not match its hash"):
        read_journal(tmp_path)


# ---------------------------------------------------------------------- layouts


def test_blobs_are_written_under_one_hex_digit_folder_in_another(tmp_path: Path) -> None:
    refs = _write(tmp_path, [{"n": n, "pad": "x" * 3000} for n in range(20)])
    root = tmp_path / "blobs"
    assert all(len(p.name) == 1 and p.is_dir() for p in root.iterdir())
    assert all(len(p.name) == 1 and p.is_dir() for top in root.iterdir() for p in top.iterdir())
    for ref in refs:
        hexpart = ref.removeprefix("sha256:")
        assert (root / hexpart[0] / hexpart[1] / hexpart[2:]).is_file()
        assert not (root / hexpart).exists() and not (root / hexpart[:2]).exists()
    journal = read_journal(tmp_path)
    assert [journal.load(ref)["n"] for ref in refs] == list(range(20))


@pytest.mark.parametrize("layout", [Layout.FLAT, Layout.BYTE])
def test_an_old_journal_reads_and_a_resumed_writer_keeps_its_blobs(
    tmp_path: Path, layout: Layout
) -> None:
    old = _write(tmp_path, [{"old": n, "pad": "x" * 3000} for n in range(3)], layout=layout)
    assert all(blob_path(tmp_path, ref, layout).is_file() for ref in old)
    assert read_journal(tmp_path).load(old[1])["old"] == 1
    with JournalWriter.open(tmp_path) as writer:  # the old run resumed by this Assay
        again = writer.put_blob({"old": 0, "pad": "x" * 3000})
        new = writer.put_blob({"new": 1, "pad": "y" * 3000})
        writer.append(
            {"kind": "step", "pos": 4, "status": "ok", "out": {"blob": new}, "blobs": [new]}
        )
    assert again == old[0] and not blob_path(tmp_path, again).exists()  # stored once
    assert blob_path(tmp_path, new).is_file() and not blob_path(tmp_path, new, layout).exists()
    journal = read_journal(tmp_path)
    assert [journal.load(r) for r in (old[2], new)] == [
        {"old": 2, "pad": "x" * 3000},
        {"new": 1, "pad": "y" * 3000},
    ]


@pytest.mark.parametrize("layout", list(Layout))
def test_a_committed_journal_of_any_layout_reads_back_from_the_forge(
    forge: Forge, tmp_path: Path, layout: Layout
) -> None:
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    sync.checkout()
    refs = _write(sync.journal_dir, [{"n": n, "pad": "z" * 3000} for n in range(4)], layout=layout)
    sync.sync("step")
    tip = str(sync.checkpoint)  # the checkpoint holds the journal; the branch, the code
    names = forge.list_tree(tip, ".assay/journal/b1")
    expected = {str(blob_path(Path(".assay/journal/b1"), ref, layout)) for ref in refs}
    assert expected <= set(names)
    shutil.rmtree(sync.journal_dir)
    journal = read_branch_journal(forge, tip, "b1", tmp_path / "read")
    assert journal is not None
    assert [journal.load(ref)["n"] for ref in refs] == [0, 1, 2, 3]
