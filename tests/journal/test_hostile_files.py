"""A journal whose files are not regular files is corrupt (exit 6), never read through.

A brief's branch is anyone's commit: a segment committed as a symlink to ``/dev/zero`` used
to make ``assay verify`` and a desk taking the branch read forever (``MemoryError``, exit 70,
the claim left held), a dangling one was 70, and one linked to a host file was read by the
gate outside the sandbox. Now every segment, blob and journal folder is checked before it is
read (no link followed, regular files only, bounded), for the reader itself, the gate's
checkout, the desk's checkout and the journal read straight from a commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from assay.errors import Corrupt
from assay.forge import open_forge
from assay.journal import JournalWriter, read_journal
from assay.journal.files import read_file
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, git

HOST_SECRET = "host-file-the-gate-must-not-read-4c1f"
SEGMENT = f".assay/journal/{BRIEF}/000001.jsonl"


def _journal(directory: Path) -> Path:
    writer = JournalWriter.open(directory, run_id="r1")
    try:
        writer.append({"kind": "start", "desk": "coder"})
        writer.put_blob(b"a payload")
    finally:
        writer.close()
    return directory


# ----------------------------------------------------------------- the reader itself


@pytest.mark.parametrize("target", ["/dev/zero", "/nonexistent/segment", "host"])
def test_a_linked_segment_is_corrupt_naming_it(tmp_path: Path, target: str) -> None:
    directory = _journal(tmp_path / "j")
    host = tmp_path / "host.txt"
    host.write_text(HOST_SECRET)
    segment = directory / "000001.jsonl"
    segment.unlink()
    segment.symlink_to(host if target == "host" else target)
    with pytest.raises(Corrupt) as caught:
        read_journal(directory)
    assert caught.value.code == 6
    assert "000001.jsonl" in caught.value.message and "symlink" in caught.value.message


def test_a_fifo_a_linked_blob_and_a_linked_folder_are_corrupt(tmp_path: Path) -> None:
    directory = _journal(tmp_path / "j")
    segment = directory / "000001.jsonl"
    data = segment.read_bytes()
    segment.unlink()
    os.mkfifo(segment)  # opening it must not wait for a writer
    with pytest.raises(Corrupt, match="a FIFO, not a regular file"):
        read_journal(directory)
    segment.unlink()
    segment.write_bytes(data)
    linked = tmp_path / "linked"
    linked.symlink_to(directory)
    with pytest.raises(Corrupt, match="is a symlink, not a directory"):
        read_journal(linked)
    (top,) = (directory / "blobs").iterdir()  # blobs/a/b/<the other 62 hex>
    (folder,) = top.iterdir()
    (blob,) = folder.iterdir()
    moved = tmp_path / "moved-blob"
    blob.rename(moved)
    blob.symlink_to(moved)
    journal = read_journal(directory)
    with pytest.raises(Corrupt, match="symlink"):
        journal.blob("sha256:" + top.name + folder.name + blob.name)


def test_a_read_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 1025)
    with pytest.raises(Corrupt, match="over the 1024 bytes"):
        read_file(path, where="big", limit=1024)
    assert read_file(path, where="big", limit=1025) == b"x" * 1025


# ------------------------------------------------------ through the CLI, on a real forge


def _linked_branch(scene: Scene, target: str) -> str:
    """The desk's branch with its first segment replaced by a symlink to ``target``."""
    scene.desk_commit({"calc.py": "def add(a, b):\n    return a + b\n"}, claims={"unit": "pass"})
    segment = scene.desk / SEGMENT
    segment.unlink()
    segment.symlink_to(target)
    git("add", "-A", cwd=scene.desk)
    git("commit", "--quiet", "-m", "link the journal", cwd=scene.desk)
    git("push", "--quiet", "origin", f"assay/{BRIEF}", cwd=scene.desk)
    head = git("rev-parse", "HEAD", cwd=scene.desk)
    scene.open_review(head)
    return head


@pytest.mark.parametrize("target", ["/dev/zero", "/nonexistent/segment", "host"])
def test_verify_of_a_linked_segment_is_corrupt(
    tmp_path: Path, run_assay: AssayRunner, target: str
) -> None:
    scene = Scene(tmp_path)
    host = tmp_path / "host.txt"
    host.write_text(HOST_SECRET)
    _linked_branch(scene, str(host) if target == "host" else target)
    env = {"ASSAY_STATE": str(tmp_path / "state"), "ASSAY_VERIFIER": "ci"}
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=env, timeout=60)
    assert done.returncode == 6, done.stdout + done.stderr
    error = json.loads(done.stdout)
    assert error["status"] == "corrupt"
    assert SEGMENT in error["message"] and "symlink" in error["message"]
    assert HOST_SECRET not in done.stdout + done.stderr


def test_the_journal_read_from_a_commit_refuses_a_symlink_entry(tmp_path: Path) -> None:
    from assay.branch import read_branch_journal

    scene = Scene(tmp_path)
    head = _linked_branch(scene, "/dev/zero")
    with open_forge(str(scene.forge)) as forge:
        forge.refresh([f"refs/heads/assay/{BRIEF}"])
        with pytest.raises(Corrupt) as caught:
            read_branch_journal(forge, head, BRIEF, tmp_path / "into")
    assert f"{head[:12]}:{SEGMENT}: a symlink, not a regular file" in caught.value.message


def test_a_desk_that_takes_a_linked_branch_releases_its_claim(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = Scene(tmp_path, claims=False)  # the branch is left for a desk to take
    _linked_branch(scene, "/dev/zero")
    desks = tmp_path / "desks"
    desks.mkdir()
    (desks / "runner.yaml").write_text(
        "name: runner\nkind: command\ntakes: {globs: ['*']}\ncommand: [\"true\"]\n"
    )
    env = {"ASSAY_STATE": str(tmp_path / "desk-state")}
    done = run_assay(
        "desk", "run", "runner", "--forge", str(scene.forge), "--desks", str(desks),
        "--once", "--json", env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 6, done.stdout + done.stderr
    (report,) = json.loads(done.stdout)["runs"]
    assert report["status"] == "corrupt" and SEGMENT in report["message"]
    claim = run_assay("claim", "list", "--forge", str(scene.forge), "--json", env=env)
    (record,) = json.loads(claim.stdout)["claims"]
    assert record["state"] == "released", record


def test_a_checkout_whose_fan_out_folder_or_blob_is_a_link_is_corrupt(tmp_path: Path) -> None:
    from assay.journal.files import check_tree

    directory = _journal(tmp_path / "root" / "j")
    check_tree(tmp_path / "root", "j")  # folders and regular files only: fine
    (folder,) = (directory / "blobs").iterdir()
    (blob,) = folder.iterdir()
    blob.rename(tmp_path / "elsewhere")
    blob.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Corrupt, match="a symlink, not a regular file"):
        check_tree(tmp_path / "root", "j")
    blob.unlink()
    (tmp_path / "elsewhere").rename(blob)
    folder.rename(tmp_path / "folder")
    folder.symlink_to(tmp_path / "folder")
    with pytest.raises(Corrupt, match="a symlink, not a regular file"):
        check_tree(tmp_path / "root", "j")
