"""assay.odb against git itself: refs, blobs, chains and trees read in process agree with
``for-each-ref``, ``cat-file``, ``rev-list`` and ``ls-tree`` on real repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest

from assay import odb
from assay.plumbing import (
    ASSAY_IDENTITY,
    GitError,
    first_parent_chain,
    local_refs,
    read_blobs,
    tree_paths,
    write_commit,
    write_tree,
)


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "r.git"
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def _commit(repo: Path, files: dict[str, bytes], parents: list[str]) -> str:
    return write_commit(
        repo, tree=write_tree(repo, files), parents=parents, message="m", author=ASSAY_IDENTITY
    )


def test_refs_read_from_files_match_for_each_ref_loose_and_packed(repo: Path) -> None:
    first = _commit(repo, {"a": b"1"}, [])
    second = _commit(repo, {"a": b"2"}, [first])
    for name, sha in (
        ("refs/assay/claims/b1", first),
        ("refs/assay/claims/b10", second),
        ("refs/assay/claimsx/b2", first),
        ("refs/heads/main", second),
    ):
        _git(repo, "update-ref", name, sha)
    _git(repo, "pack-refs", "--all")
    _git(repo, "update-ref", "refs/assay/claims/b1", second)  # loose now wins over packed
    _git(repo, "update-ref", "refs/assay/claims/b3", first)
    # "<ref>/" asks for what lies under the ref, not the ref itself (loose or packed).
    patterns = ("refs/assay/claims/b1/", "refs/heads/main/", "refs/heads/main", "refs/")
    for pattern in ("refs/assay/claims/", "refs/assay/claims", *patterns):
        listed = _git(repo, "for-each-ref", "--format=%(objectname) %(refname)", pattern)
        expected = dict(reversed(line.split(" ", 1)) for line in listed.splitlines())
        assert local_refs(repo, pattern) == expected
    _git(repo, "update-ref", "-d", "refs/assay/claims/b10")
    assert "refs/assay/claims/b10" not in local_refs(repo, "refs/assay/claims/")
    # packed-refs rewritten (b1's new value packed, its loose file gone): read afresh.
    _git(repo, "update-ref", "refs/assay/claimsx/b2", second)
    _git(repo, "pack-refs", "--all")
    listed = _git(repo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/")
    assert local_refs(repo, "refs/") == dict(
        reversed(line.split(" ", 1)) for line in listed.splitlines()
    )


def test_blobs_chains_and_trees_match_git(repo: Path) -> None:
    first = _commit(repo, {"briefs/a.md": b"A", "x/y/z.txt": b"Z"}, [])
    second = _commit(repo, {"briefs/a.md": b"A2", "briefs/b.md": b"B"}, [first])
    assert read_blobs(repo, [f"{second}:briefs/a.md", f"{first}:x/y/z.txt"]) == [b"A2", b"Z"]
    assert read_blobs(repo, [f"{second}:x/y/z.txt", f"{second}:briefs", "0" * 40 + ":a"]) == [
        None,
        None,
        None,
    ]
    assert first_parent_chain(repo, second) == _git(repo, "rev-list", second).split()
    assert first_parent_chain(repo, second, limit=1) == [second]
    listed = _git(repo, "ls-tree", "-r", "--name-only", second).split()
    assert tree_paths(repo, second) == sorted(listed)
    assert tree_paths(repo, second, under="briefs/") == ["briefs/a.md", "briefs/b.md"]
    with pytest.raises(GitError):
        first_parent_chain(repo, "1" * 40)
    assert odb.merged_into(repo, [first, second, "1" * 40], second) == [first, second]
    assert odb.merged_into(repo, [second], first) == []


def test_copy_objects_brings_a_commit_with_all_it_reaches_and_nothing_else(
    repo: Path, tmp_path: Path
) -> None:
    target = tmp_path / "t.git"
    subprocess.run(["git", "init", "-q", "--bare", str(target)], check=True)
    base = _commit(repo, {"a/x.txt": b"x\n", "b.txt": b"b\n"}, [])
    subprocess.run(["git", f"--git-dir={target}", "fetch", "-q", str(repo), base], check=True)
    one = _commit(repo, {"a/x.txt": b"x\n", "b.txt": b"b2\n", "c/d/e.txt": b"e\n"}, [base])
    two = _commit(repo, {"a/x.txt": b"x2\n", "b.txt": b"b2\n", "c/d/e.txt": b"e\n"}, [one])
    unrelated = _commit(repo, {"z.txt": b"z\n"}, [])

    assert odb.copy_objects(repo, target, [two]) == 2  # two and one; base was there
    _git(target, "fsck", "--strict", "--no-dangling")  # every object two reaches is present
    assert _git(target, "rev-list", "--objects", two) == _git(repo, "rev-list", "--objects", two)
    assert not odb.is_commit(target, unrelated)
    assert odb.copy_objects(repo, target, [two]) == 0  # present: nothing to do


def test_copy_objects_writes_what_the_objects_are_not_what_a_file_claims(
    repo: Path, tmp_path: Path
) -> None:
    # A loose object file in the source that does not hash to its name (written by anything
    # with access to the source's object folder) is refused, never copied under that name.
    target = tmp_path / "t.git"
    subprocess.run(["git", "init", "-q", "--bare", str(target)], check=True)
    honest = _commit(repo, {"f.txt": b"honest\n"}, [])
    blob = _git(repo, "rev-parse", f"{honest}:f.txt").strip()
    forged = (
        subprocess.run(
            ["git", f"--git-dir={repo}", "hash-object", "-w", "--stdin"],
            input=b"forged\n",
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    loose = repo / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes((repo / "objects" / forged[:2] / forged[2:]).read_bytes())
    odb.forget(repo)
    with pytest.raises(pygit2.GitError, match="hash"):  # libgit2 checks each read's hash
        odb.copy_objects(repo, target, [honest])
    assert not odb.is_commit(target, honest)
    assert blob not in odb.repository(target).odb
