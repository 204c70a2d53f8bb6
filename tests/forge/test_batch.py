"""``GitBatch`` (the in-process object reader every snapshot reads through) answers each
address as ``git cat-file --batch`` does on the same repository, and starts no git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from assay.forge.batch import GitBatch
from assay.plumbing import ASSAY_IDENTITY, write_commit, write_tree


def _cat_file(git_dir: Path, spec: str) -> tuple[str, bytes] | None:
    """What ``git cat-file --batch`` answers for one address."""
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
        input=spec.encode() + b"\n",
        capture_output=True,
        check=True,
    )
    header, _, rest = done.stdout.partition(b"\n")
    fields = header.split()
    if len(fields) != 3:
        return None
    return fields[1].decode(), rest[: int(fields[2])]


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    path = tmp_path / "r.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    files = {
        "claim.json": b'{"v": 1}\n',
        "briefs/a.md": b"# a\n",
        "briefs/deep/b.md": b"# b\n",
        "\u00e9t\u00e9.txt": "caf\u00e9\n".encode(),
    }
    first = write_commit(
        path, tree=write_tree(path, files), parents=[], message="m", author=ASSAY_IDENTITY
    )
    second = write_commit(
        path,
        tree=write_tree(path, {**files, "claim.json": b'{"v": 2}\n'}),
        parents=[first],
        message="n",
        author=ASSAY_IDENTITY,
    )
    subprocess.run(
        ["git", f"--git-dir={path}", "update-ref", "refs/heads/main", second], check=True
    )
    return path, first, second


ADDRESSES = [
    "{second}",
    "{second}:claim.json",
    "{first}:claim.json",
    "{second}:briefs",
    "{second}:briefs/deep/b.md",
    "{second}:",
    "{second}:\u00e9t\u00e9.txt",
    "{second}:missing.json",
    "{second}:claim.json/inside",  # a path through a blob
    "{second}:briefs/../claim.json",
    "{second}:/claim.json",
    "{second}^{{tree}}",
    "{second}~1:claim.json",
    "main:claim.json",
    "{short}:claim.json",  # an abbreviated id
    "0" * 40,
    "0" * 40 + ":claim.json",
    "not a revision",
    "",
]


@pytest.mark.parametrize("template", ADDRESSES)
def test_every_address_reads_as_cat_file_reads_it(
    repo: tuple[Path, str, str], template: str
) -> None:
    path, first, second = repo
    spec = template.format(first=first, second=second, short=second[:10])
    with GitBatch(path) as batch:
        assert batch.read(spec) == _cat_file(path, spec)


def test_trees_and_blobs_are_typed(repo: tuple[Path, str, str]) -> None:
    path, _, second = repo
    with GitBatch(path) as batch:
        assert batch.blob(f"{second}:briefs") is None  # a tree is not a blob
        assert batch.tree(f"{second}:claim.json") is None  # nor a blob a tree
        tree = batch.tree(f"{second}:briefs")
        assert tree is not None and set(tree) == {"a.md", "deep"}
        assert tree["deep"][0] == "40000" and tree["a.md"][0] == "100644"
        assert batch.blob(tree["a.md"][1]) == b"# a\n"


def test_a_newline_in_an_address_reads_nothing(repo: tuple[Path, str, str]) -> None:
    # cat-file would read two addresses; the reader refuses to be steered that way.
    path, _, second = repo
    with GitBatch(path) as batch:
        assert batch.read(f"{second}:claim.json\n{second}") is None


def test_reading_starts_no_git(
    repo: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, second = repo
    monkeypatch.setenv("PATH", "")  # no git to find
    assert os.environ["PATH"] == ""
    with GitBatch(path) as batch:
        assert batch.blob(f"{second}:claim.json") == b'{"v": 2}\n'
        assert batch.blob("main:briefs/a.md") == b"# a\n"


def test_objects_packed_after_opening_are_read(repo: tuple[Path, str, str]) -> None:
    # A long-running desk keeps one handle; a later fetch or gc moves objects into packs
    # the handle has not seen.
    path, _, second = repo
    with GitBatch(path) as batch:
        assert batch.blob(f"{second}:claim.json") is not None
        late = write_commit(
            path,
            tree=write_tree(path, {"late.txt": b"late\n"}),
            parents=[second],
            message="late",
            author=ASSAY_IDENTITY,
        )
        git = ["git", f"--git-dir={path}"]
        subprocess.run([*git, "update-ref", "refs/heads/main", late], check=True)
        subprocess.run([*git, "repack", "-q", "-a", "-d"], check=True)
        subprocess.run([*git, "prune-packed"], check=True)
        assert not any((path / "objects").glob("[0-9a-f][0-9a-f]/*"))  # only packs now
        assert batch.blob(f"{late}:late.txt") == b"late\n"
        assert batch.blob(f"{second}:claim.json") == b'{"v": 2}\n'
