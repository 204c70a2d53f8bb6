"""The git boundary: objects without a work tree, push outcomes, and the error mapping."""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from assay.errors import ForgeUnavailable
from assay.forge import Forge, open_forge
from assay.plumbing import (
    UNCHECKED,
    GitError,
    Identity,
    PushOutcome,
    PushResult,
    RefUpdate,
    RetryPolicy,
    changed_files,
    failure,
    parse_porcelain,
    with_retries,
)
from tests.forge_fixtures import free_port

ME = Identity("coder", "h1@coder.assay.invalid")
FAST = RetryPolicy(attempts=3, max_seconds=5, initial_wait=0.01, max_wait=0.05)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], capture_output=True, text=True, check=True
    ).stdout


def test_commits_without_a_work_tree_pass_fsck_and_name_their_author(forge: Forge) -> None:
    files = {"a.txt": b"one\n", "dir/b.txt": b"two\n", "dir/sub/c": b"", "dir-x": b"x"}
    commit = forge.commit(files, parents=[], message="first", author=ME)
    child = forge.commit({"a.txt": b"1"}, parents=[commit], message="second", author=ME)
    listing = _git(forge.state_dir, "ls-tree", "-r", "--name-only", commit).split()
    assert listing == ["a.txt", "dir-x", "dir/b.txt", "dir/sub/c"]
    assert forge.read_blob(commit, "dir/b.txt") == b"two\n"
    assert forge.read_blob(commit, "missing") is None
    assert _git(forge.state_dir, "log", "--format=%an <%ae>|%cn|%s", child).splitlines() == [
        "coder <h1@coder.assay.invalid>|coder|second",
        "coder <h1@coder.assay.invalid>|coder|first",
    ]
    _git(forge.state_dir, "update-ref", "refs/test/keep", child)
    fsck = subprocess.run(
        ["git", f"--git-dir={forge.state_dir}", "fsck", "--strict", "--no-dangling"],
        capture_output=True,
        text=True,
    )
    assert fsck.returncode == 0, fsck.stderr


def test_bad_paths_and_identities_are_refused(forge: Forge) -> None:
    for path in ("../x", "a//b", ".git/config", "a/./b"):
        with pytest.raises(GitError):
            forge.commit({path: b""}, parents=[], message="m", author=ME)
    with pytest.raises(GitError):
        Identity("evil\nname", "a@b")


def test_push_names_every_outcome(forge: Forge, forge_path: Path) -> None:
    ref = "refs/assay/claims/b1"
    one = forge.commit({"f": b"1"}, parents=[], message="1", author=ME)
    two = forge.commit({"f": b"2"}, parents=[one], message="2", author=ME)
    other = forge.commit({"f": b"x"}, parents=[], message="x", author=ME)
    assert forge.push([RefUpdate(ref, one, expected=None)]).outcome is PushOutcome.CREATED
    assert forge.push([RefUpdate(ref, one, expected=None)]).outcome is PushOutcome.UP_TO_DATE
    stale = forge.push([RefUpdate(ref, two, expected=None)])
    assert stale.outcome is PushOutcome.STALE and stale.lost and not stale.ok
    assert forge.push([RefUpdate(ref, two, expected=one)]).outcome is PushOutcome.FAST_FORWARD
    assert forge.push([RefUpdate(ref, other, expected=two)]).outcome is PushOutcome.FORCED
    assert forge.push([RefUpdate(ref, one, expected=UNCHECKED)]).outcome is PushOutcome.FORCED
    assert forge.push([RefUpdate(ref, None, expected=one)]).outcome is PushOutcome.DELETED
    assert forge.ls_refs("refs/assay/") == {}


def test_a_ref_another_pusher_holds_locked_is_a_lost_race(forge: Forge, forge_path: Path) -> None:
    ref = "refs/assay/claims/b1"
    one = forge.commit({"f": b"1"}, parents=[], message="1", author=ME)
    two = forge.commit({"f": b"2"}, parents=[one], message="2", author=ME)
    theirs = forge.commit({"f": b"3"}, parents=[one], message="3", author=ME)
    assert forge.push([RefUpdate(ref, one, expected=None)]).ok
    assert forge.push([RefUpdate("refs/assay/claims/other", theirs, expected=None)]).ok
    # Another pusher holds the ref's lock when our push starts, and lands its update as git
    # does (the lock renamed over the ref) while ours runs: whether our push meets the held
    # lock (and waits it out) or the moved ref, it has lost. No instant is chosen.
    lock = forge_path / (ref + ".lock")
    lock.write_text(theirs + "\n")
    results: list[PushResult] = []
    ours = threading.Thread(
        target=lambda: results.append(forge.push([RefUpdate(ref, two, expected=one)]))
    )
    ours.start()
    os.rename(lock, forge_path / ref)
    ours.join(timeout=60)
    [result] = results
    assert result.lost, result
    assert forge.fetch(ref) == {ref: theirs}


def test_atomic_push_moves_all_refs_or_none(forge: Forge) -> None:
    a, b = "refs/assay/evidence/b1", "refs/assay/reviews/b1"
    one = forge.commit({"f": b"1"}, parents=[], message="1", author=ME)
    two = forge.commit({"f": b"2"}, parents=[one], message="2", author=ME)
    assert forge.push([RefUpdate(a, one, expected=None)]).ok
    result = forge.push([RefUpdate(b, two, expected=None), RefUpdate(a, two, expected=None)])
    assert result.lost and result.refs[a] is PushOutcome.STALE
    assert result.refs[b] is PushOutcome.REJECTED
    assert forge.ls_refs("refs/assay/") == {a: one}


def test_fetch_of_a_prefix_and_of_exact_refs_in_one_round_trip(forge: Forge) -> None:
    one = forge.commit({"f": b"1"}, parents=[], message="1", author=ME)
    refs = ["refs/assay/claims/b1", "refs/assay/claims/b10", "refs/assay/claims/c"]
    assert forge.push([RefUpdate(r, one, expected=None) for r in refs]).ok
    assert forge.fetch("refs/assay/claims/") == dict.fromkeys(refs, one)
    assert forge.fetch("refs/assay/claims/b1") == {"refs/assay/claims/b1": one}
    assert forge.fetch(["refs/assay/claims/zz", "refs/assay/claims/c"]) == {
        "refs/assay/claims/c": one
    }
    assert forge.push([RefUpdate("refs/assay/claims/b1", None, expected=one)]).ok
    assert "refs/assay/claims/b1" not in forge.fetch("refs/assay/claims/")


def test_two_forges_share_a_cache_without_sharing_refs(
    forge_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "shared-cache"
    first = open_forge(str(forge_path), cache_dir=cache)
    second = open_forge(str(forge_path), cache_dir=cache)
    assert first.namespace != second.namespace
    one = first.commit({"f": b"1"}, parents=[], message="1", author=ME)
    assert first.push([RefUpdate("refs/assay/status/b1", one, expected=None)]).ok
    assert first.fetch("refs/assay/status/") == {"refs/assay/status/b1": one}
    assert second.fetch("refs/assay/reviews/") == {}
    monkeypatch.setenv("PATH", "")  # its refs are loose: dropped with no git process
    first.close()
    monkeypatch.undo()
    assert _git(cache, "for-each-ref", first.namespace) == ""
    assert not (cache / first.namespace).exists()  # no folder left behind either
    assert second.fetch("refs/assay/status/") == {"refs/assay/status/b1": one}
    second.close()


def test_a_closed_forge_drops_its_refs_loose_and_packed(forge_path: Path, tmp_path: Path) -> None:
    """Its loose refs are removed in process; a ref git packed is deleted by git."""
    cache = tmp_path / "cache"
    forge = open_forge(str(forge_path), cache_dir=cache)
    other = open_forge(str(forge_path), cache_dir=cache)
    one = forge.commit({"f": b"1"}, parents=[], message="1", author=ME)
    refs = ["refs/assay/status/b1", "refs/assay/status/b2"]
    assert forge.push([RefUpdate(r, one, expected=None) for r in refs]).ok
    assert forge.fetch("refs/assay/status/") == dict.fromkeys(refs, one)
    assert other.fetch("refs/assay/status/") == dict.fromkeys(refs, one)
    _git(cache, "pack-refs", "--all")  # both instances' copies now in packed-refs
    two = forge.commit({"f": b"2"}, parents=[], message="2", author=ME)
    # One loose again, at another value: the loose file hides its packed copy.
    _git(cache, "update-ref", f"{forge.namespace}/{refs[0]}", two)
    forge.close()
    assert _git(cache, "for-each-ref", forge.namespace) == ""
    listed = _git(cache, "for-each-ref", "--format=%(refname)", other.namespace).split()
    assert listed == [f"{other.namespace}/{r}" for r in refs]  # a peer's refs untouched
    other.close()
    assert _git(cache, "for-each-ref", other.namespace) == ""


def test_an_unreachable_forge_is_retried_then_unavailable(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    dead = Forge(f"http://127.0.0.1:{free_port()}/forge.git", cache_dir=tmp_path / "c", retry=FAST)
    with (
        caplog.at_level(logging.WARNING, logger="assay.plumbing"),
        pytest.raises(ForgeUnavailable) as raised,
    ):
        dead.fetch("refs/assay/claims/")
    assert raised.value.code == 69 and "after retries" in raised.value.message
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 2
    dead.close()


def test_a_missing_repository_is_unavailable_without_retries(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    gone = Forge(f"file://{tmp_path}/nothing.git", cache_dir=tmp_path / "c", retry=FAST)
    with (
        caplog.at_level(logging.WARNING, logger="assay.plumbing"),
        pytest.raises(ForgeUnavailable, match="no repository"),
    ):
        gone.ls_refs()
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]
    gone.close()


def test_a_lost_race_is_never_retried(forge: Forge, caplog: pytest.LogCaptureFixture) -> None:
    one = forge.commit({"f": b"1"}, parents=[], message="1", author=ME)
    assert forge.push([RefUpdate("refs/assay/claims/b1", one, expected=None)]).ok
    calls = 0

    def attempt() -> PushOutcome:
        nonlocal calls
        calls += 1
        return forge.push([RefUpdate("refs/assay/claims/b1", one + "", expected=None)]).outcome

    two = forge.commit({"f": b"2"}, parents=[], message="2", author=ME)
    started = time.monotonic()
    result = forge.push([RefUpdate("refs/assay/claims/b1", two, expected=None)])
    assert result.outcome is PushOutcome.STALE
    assert time.monotonic() - started < 5
    assert with_retries("x", attempt, policy=FAST) is PushOutcome.UP_TO_DATE and calls == 1
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("fatal: unable to access 'http://x/': Failed to connect", "transient"),
        ("fatal: unable to connect to 127.0.0.1:\nerrno=Connection refused", "transient"),
        ("error: RPC failed; HTTP 502\nfatal: the remote end hung up unexpectedly", "transient"),
        ("fatal: '/x.git' does not appear to be a git repository", "missing"),
        ("fatal: remote error: access denied or repository not exported: /x", "missing"),
        ("fatal: bad object 1234", "git"),
    ],
)
def test_git_failures_map_to_typed_errors(stderr: str, kind: str) -> None:
    done = subprocess.CompletedProcess(["git", "fetch"], 128, b"", stderr.encode())
    error = failure(["fetch", "url"], done)
    assert isinstance(error, GitError)
    if kind == "git":
        with pytest.raises(GitError):
            with_retries("op", lambda: (_ for _ in ()).throw(error), policy=FAST)
        return
    with pytest.raises(ForgeUnavailable) as raised:
        with_retries("op", lambda: (_ for _ in ()).throw(error), policy=FAST)
    assert raised.value.code == 69


def test_porcelain_lines_become_outcomes() -> None:
    text = "\n".join(
        [
            "To http://x/forge.git",
            "*\tabc:refs/a\t[new reference]",
            "!\tabc:refs/b\t[rejected] (stale info)",
            "!\tabc:refs/c\t[remote rejected] (cannot lock ref 'refs/c': is at 1 but expected 2)",
            "!\tabc:refs/d\t[rejected] (atomic push failed)",
            "!\tabc:refs/e\t[remote rejected] (pre-receive hook declined)",
            "Done",
        ]
    )
    parsed = {ref: outcome for ref, (outcome, _) in parse_porcelain(text).items()}
    assert parsed == {
        "refs/a": PushOutcome.CREATED,
        "refs/b": PushOutcome.STALE,
        "refs/c": PushOutcome.LOST_RACE,
        "refs/d": PushOutcome.REJECTED,
        "refs/e": PushOutcome.REJECTED,
    }


def _git_status_paths(root: Path) -> list[str]:
    """What ``git status`` says ``git add --all`` would stage (its porcelain, not deletions)."""
    out = subprocess.run(
        ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "surrogateescape")
    fields, names, at = out.split("\0"), [], 0
    while at < len(fields):
        entry, at = fields[at], at + 1
        if len(entry) < 4:
            continue
        if "R" in entry[:2] or "C" in entry[:2]:
            at += 1  # the rename's source follows
        if entry[:2].strip() != "D":
            names.append(entry[3:])
    return sorted(names)


def test_changed_files_are_what_git_status_reports(tmp_path: Path) -> None:
    root = tmp_path / "work"
    run = functools.partial(subprocess.run, cwd=root, check=True, capture_output=True)
    root.mkdir()
    run(["git", "init", "-q"])
    files = {"kept.txt": "k", "edited.txt": "e", "gone.txt": "g", "moved.txt": "m", "d/x": "x"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    run(["git", "add", "-A"])
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"])
    (root / "edited.txt").write_text("changed")
    (root / "gone.txt").unlink()
    run(["git", "mv", "moved.txt", "renamed.txt"])
    (root / "staged.txt").write_text("s")
    run(["git", "add", "staged.txt"])
    (root / "new dir" / "deep").mkdir(parents=True)
    (root / "new dir" / "deep" / "ünï cödé.txt").write_text("u")
    (root / "noise.log").write_text("ignored")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_text("ignored")
    (root / "d" / "x").chmod(0o755)  # a mode change is a change
    expected = _git_status_paths(root)
    assert {"edited.txt", "renamed.txt", "staged.txt", "d/x"} <= set(expected)
    assert changed_files(root) == expected
