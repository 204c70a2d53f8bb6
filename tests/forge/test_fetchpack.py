"""The in-process fetch (``assay.forge.fetchpack``) against git and against hostile packs.

- What it brings is what ``git fetch`` brings: the same objects, ``git fsck`` clean, deltas
  (ofs and ref) resolved; a view's refresh over smart HTTP starts no git process on either
  side; from a local forge the objects are copied with no git.
- A pack that lies (its checksum, a size, a delta, an object it names but does not hold, the
  commit asked for missing) is ``ForgeUnavailable`` and writes nothing; an answer
  upload-pack refused, or a forge this does not fetch from, is ``NeedsGit``.
- Killed at any instant while it writes, the cache holds no commit whose history or tree is
  incomplete: ``git fsck`` finds no broken link.
"""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from assay import odb
from assay.errors import ForgeUnavailable
from assay.forge import ForgeServer, fetchpack, open_forge
from assay.forge.fetchpack import NeedsGit, pack_of, store
from assay.forge.packfile import apply_delta, object_id, read_pack
from tests.conftest import REPO_ROOT


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, check=True
    ).stdout


def _history(root: Path, commits: int = 4, lines: int = 3000) -> tuple[Path, list[str]]:
    """A bare repository whose commits each change a few lines of big files: deltas."""
    bare = root / "src.git"
    git("init", "-q", "--bare", "-b", "main", str(bare))
    work = root / "work"
    git("clone", "-q", str(bare), str(work))
    git("checkout", "-q", "-b", "main", cwd=work)
    tips = []
    for number in range(commits):
        for name in ("a.txt", "b.txt"):
            body = [f"{name} line {i}\n" for i in range(lines)]
            body[(number * 7) % lines] = f"changed in {number}\n"
            (work / name).write_text("".join(body))
        (work / "dir").mkdir(exist_ok=True)
        (work / "dir" / f"n{number}.json").write_text(f'{{"n": {number}}}\n')
        git("add", "-A", cwd=work)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"c{number}", cwd=work)
        tips.append(git("rev-parse", "HEAD", cwd=work).decode().strip())
    git("push", "-q", "origin", "main", cwd=work)
    return bare, tips


def _empty(root: Path, name: str = "cache.git") -> Path:
    path = root / name
    git("init", "-q", "--bare", str(path))
    return path


def _objects(git_dir: Path, tip: str) -> set[str]:
    listed = git(f"--git-dir={git_dir}", "rev-list", "--objects", tip).decode().split("\n")
    return {line.split(" ")[0] for line in listed if line}


def _pack(bare: Path, revs: str, *options: str) -> bytes:
    """What upload-pack would send: ``git pack-objects`` of ``revs``."""
    return git(
        f"--git-dir={bare}",
        "pack-objects",
        "--revs",
        "--stdout",
        "-q",
        *options,
        input=revs.encode(),
    )


def _pkt(payload: bytes) -> bytes:
    return f"{len(payload) + 4:04x}".encode() + payload


def _loose_count(git_dir: Path) -> int:
    return sum(1 for p in (git_dir / "objects").glob("[0-9a-f][0-9a-f]/*"))


# ---------------------------------------------------------------------------- as git does


def test_a_fetch_brings_what_git_fetch_brings(tmp_path: Path) -> None:
    bare, tips = _history(tmp_path)
    ours, theirs = _empty(tmp_path, "ours.git"), _empty(tmp_path, "theirs.git")
    url = f"file://{bare}"
    fetchpack.fetch(url, ours, wants=[tips[1]], haves=[], config={}, display_url="src")
    fetchpack.fetch(url, ours, wants=[tips[-1]], haves=[tips[1]], config={}, display_url="src")
    git(f"--git-dir={theirs}", "fetch", "-q", str(bare), "main:refs/heads/main")
    assert _objects(ours, tips[-1]) == _objects(theirs, tips[-1])
    git(f"--git-dir={ours}", "update-ref", "refs/heads/main", tips[-1])
    git(f"--git-dir={ours}", "fsck", "--full", "--strict")


@pytest.mark.parametrize("deltas", [[], ["--delta-base-offset"]], ids=["ref-delta", "ofs-delta"])
def test_both_kinds_of_delta_are_resolved(tmp_path: Path, deltas: list[str]) -> None:
    bare, tips = _history(tmp_path)
    pack = _pack(bare, tips[-1] + "\n", *deltas)
    objects = read_pack(pack, "src")
    assert set(objects) == _objects(bare, tips[-1])
    assert all(object_id(found) == sha for sha, found in objects.items())
    saved = tmp_path / "check.pack"
    saved.write_bytes(pack)
    git("index-pack", str(saved))
    assert b"chain length" in git("verify-pack", "-v", str(saved))  # git made deltas
    cache = _empty(tmp_path)
    assert store(cache, objects, wants=[tips[-1]], where="src") == len(objects)
    git(f"--git-dir={cache}", "update-ref", "refs/heads/main", tips[-1])
    git(f"--git-dir={cache}", "fsck", "--full", "--strict")


def test_a_refresh_over_smart_http_starts_no_git_on_either_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The desk's fetch is one request, and the server answers it in its own process."""
    bare, tips = _history(tmp_path)
    with ForgeServer(bare) as server, open_forge(server.url, cache_dir=tmp_path / "cache") as forge:
        git(f"--git-dir={bare}", "update-ref", "refs/heads/main", tips[1])
        assert forge.refresh(["refs/heads/main"]) == {"refs/heads/main": tips[1]}
        git(f"--git-dir={bare}", "update-ref", "refs/heads/main", tips[-1])
        before = dict(server.started)
        monkeypatch.setenv("PATH", "")  # no git to start
        assert forge.refresh(["refs/heads/main"]) == {"refs/heads/main": tips[-1]}
        started = {k: v - before.get(k, 0) for k, v in server.started.items()}
        monkeypatch.undo()
        assert started == {"fetched": 1}
        assert forge.read_blob(tips[-1], "dir/n3.json") == b'{"n": 3}\n'


@pytest.mark.parametrize("history", ["copied", "past the copy's limit"])
def test_a_local_fetch_copies_the_forges_objects_or_asks_upload_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: str
) -> None:
    """From a ``file://`` forge the objects are copied in process (no git at all), and a
    history longer than the copy takes goes to upload-pack: the same objects either way."""
    bare, tips = _history(tmp_path)
    ours, theirs = _empty(tmp_path, "ours.git"), _empty(tmp_path, "theirs.git")
    if history == "copied":
        monkeypatch.setenv("PATH", "")  # no git to start
    else:
        monkeypatch.setattr(odb, "MAX_COPIED_COMMITS", 1)
    url = f"file://{bare}"
    fetchpack.fetch(url, ours, wants=[tips[-1]], haves=[], config={}, display_url="src")
    monkeypatch.undo()
    git(f"--git-dir={theirs}", "fetch", "-q", str(bare), "main:refs/heads/main")
    assert _objects(ours, tips[-1]) == _objects(theirs, tips[-1])
    git(f"--git-dir={ours}", "update-ref", "refs/heads/main", tips[-1])
    git(f"--git-dir={ours}", "fsck", "--full", "--strict")


# ---------------------------------------------------------------------------- hostile packs


def _bomb() -> bytes:
    """A one-object pack whose blob says 10 bytes and inflates to a megabyte."""
    data = zlib.compress(b"\0" * (1 << 20))
    body = b"PACK" + (2).to_bytes(4) + (1).to_bytes(4) + bytes([(3 << 4) | 10]) + data
    return body + hashlib.sha1(body).digest()


def _resealed(pack: bytes) -> bytes:
    return pack[:-20] + hashlib.sha1(pack[:-20]).digest()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p[:-1] + bytes([p[-1] ^ 1]), "checksum"),
        (lambda p: p[: len(p) // 2], "checksum"),
        (lambda p: b"NOPE" + p[4:], "not a pack"),
        (lambda p: _resealed(p[:8] + (9999).to_bytes(4) + p[12:]), "cut short"),
        (lambda p: _resealed(p[:-20] + b"trailing junk" + p[-20:]), "after the pack"),
        (lambda p: _bomb(), "past its size"),
    ],
    ids=["checksum", "truncated", "magic", "count", "trailing", "bomb"],
)
def test_a_pack_that_lies_is_refused(tmp_path: Path, make: object, said: str) -> None:
    bare, tips = _history(tmp_path, commits=2)
    pack = make(_pack(bare, tips[-1] + "\n"))  # type: ignore[operator]
    with pytest.raises(ForgeUnavailable) as refused:
        read_pack(pack, "evil")
    assert said in refused.value.message and "evil" in refused.value.message


def test_a_delta_that_copies_past_its_base_is_refused() -> None:
    base = b"0123456789"
    copy_past = bytes([10, 20, 0x80 | 0x01 | 0x10, 5, 20])  # copy 20 bytes at offset 5
    with pytest.raises(ForgeUnavailable, match="past its base"):
        apply_delta(base, copy_past, "evil")
    with pytest.raises(ForgeUnavailable, match="base got"):
        apply_delta(base, bytes([3, 3, 3]) + b"abc", "evil")
    with pytest.raises(ForgeUnavailable, match="reserved"):
        apply_delta(base, bytes([10, 1, 0]), "evil")
    assert apply_delta(base, bytes([10, 4, 0x80 | 0x01 | 0x10, 2, 2, 2]) + b"xy", "ok") == b"23xy"


def test_an_incomplete_pack_writes_nothing(tmp_path: Path) -> None:
    # The newest commit alone: its parent is neither in the pack nor in the empty cache.
    bare, tips = _history(tmp_path)
    pack = _pack(bare, f"{tips[-1]}\n^{tips[-2]}\n")
    cache = _empty(tmp_path)
    with pytest.raises(ForgeUnavailable, match="incomplete"):
        store(cache, read_pack(pack, "evil"), wants=[tips[-1]], where="evil")
    assert _loose_count(cache) == 0


def test_a_pack_without_the_commit_asked_for_writes_nothing(tmp_path: Path) -> None:
    bare, tips = _history(tmp_path)
    cache = _empty(tmp_path)
    objects = read_pack(_pack(bare, tips[0] + "\n"), "evil")
    with pytest.raises(ForgeUnavailable, match="asked for"):
        store(cache, objects, wants=[tips[-1]], where="evil")
    assert _loose_count(cache) == 0


def test_upload_packs_refusal_is_for_git_to_fetch() -> None:
    with pytest.raises(NeedsGit, match="not our ref"):
        pack_of(_pkt(b"ERR upload-pack: not our ref\n") + b"0000", "forge")
    with pytest.raises(NeedsGit, match="gone away"):
        pack_of(_pkt(b"packfile\n") + _pkt(b"\x03fatal: gone away") + b"0000", "forge")
    with pytest.raises(ForgeUnavailable, match="no pack section"):
        pack_of(_pkt(b"acknowledgments\n") + b"0000", "forge")
    with pytest.raises(ForgeUnavailable, match="channel 9"):
        pack_of(_pkt(b"packfile\n") + _pkt(b"\x09what") + b"0000", "forge")


def test_a_forge_this_does_not_fetch_from_is_for_git(tmp_path: Path) -> None:
    cache = _empty(tmp_path)
    for url in ("ssh://example.invalid/x.git", "http://127.0.0.1:9/never-advertised.git"):
        with pytest.raises(NeedsGit):
            fetchpack.fetch(url, cache, wants=["0" * 40], haves=[], config={}, display_url=url)


# ---------------------------------------------------------------------------- killed


_STORE_IN_CHILD = """
import sys
from pathlib import Path
from assay.forge.fetchpack import store
from assay.forge.packfile import read_pack
pack = Path(sys.argv[1]).read_bytes()
objects = read_pack(pack, "src")
print("storing", flush=True)
store(Path(sys.argv[2]), objects, wants=[sys.argv[3]], where="src")
print("stored", flush=True)
"""


def _long_history(root: Path, commits: int) -> tuple[Path, str]:
    """A bare repository of ``commits`` commits, each adding a file (git fast-import)."""
    bare = root / "long.git"
    git("init", "-q", "--bare", "-b", "main", str(bare))
    stream = []
    for number in range(commits):
        blob = f"file {number}\n".encode()
        stream.append(b"commit refs/heads/main\ncommitter t <t@t> 0 +0000\ndata 2\nc\n")
        stream.append(f"M 100644 inline d{number % 10}/f{number}.txt\n".encode())
        stream.append(f"data {len(blob)}\n".encode() + blob + b"\n")
    git(f"--git-dir={bare}", "fast-import", "--quiet", input=b"".join(stream))
    return bare, git(f"--git-dir={bare}", "rev-parse", "main").decode().strip()


def _incomplete(git_dir: Path) -> list[str]:
    """Objects in ``git_dir`` that name one it does not hold (every object, reachable or not)."""
    import pygit2

    repo = pygit2.Repository(str(git_dir))
    found = []
    for oid in repo.odb:
        obj = repo[oid]
        if isinstance(obj, pygit2.Commit):
            named = [obj.tree_id, *obj.parent_ids]
        elif isinstance(obj, pygit2.Tree):
            named = [entry.id for entry in obj if entry.filemode != 0o160000]
        else:
            named = []
        found += [f"{obj.type_str} {oid} names {n}" for n in named if n not in repo.odb]
    return found


# The local forge's fetch: the forge's objects copied straight into the cache.
_COPY_IN_CHILD = """
import sys
from pathlib import Path
from assay.forge import fetchpack
forge, cache, tip = sys.argv[1:]
print("storing", flush=True)
fetchpack.fetch("file://" + forge, Path(cache), wants=[tip], haves=[], config={}, display_url="f")
print("stored", flush=True)
"""


def _store_in_child(
    source: Path, cache: Path, tip: str, script: str = _STORE_IN_CHILD
) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(source), str(cache), tip],
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdout.readline() == b"storing\n"
    return child


@pytest.mark.parametrize("writer", ["pack", "local copy"])
def test_killed_at_any_instant_while_writing_the_cache_holds_no_incomplete_object(
    tmp_path: Path, writer: str
) -> None:
    bare, tip = _long_history(tmp_path, commits=600)
    pack = tmp_path / "all.pack"
    pack.write_bytes(_pack(bare, tip + "\n"))
    source, script = (pack, _STORE_IN_CHILD) if writer == "pack" else (bare, _COPY_IN_CHILD)
    whole = _store_in_child(source, _empty(tmp_path, "whole.git"), tip, script)
    began = time.monotonic()
    assert whole.stdout is not None and whole.stdout.readline() == b"stored\n"
    lasts = time.monotonic() - began  # how long writing takes here: the window to kill in
    whole.communicate(timeout=30)
    chance = random.Random(17)
    killed_midway = 0
    for round_ in range(8):
        cache = _empty(tmp_path, f"cache{round_}.git")
        child = _store_in_child(source, cache, tip, script)
        try:
            # The instant of the kill: within the first half of the writing as first timed,
            # so a run that happens to write faster is still killed inside it.
            child.wait(timeout=chance.uniform(0.0, lasts / 2))
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        killed_midway += b"stored" not in out
        assert _incomplete(cache) == []
    assert killed_midway > 0  # the kills landed inside the writing
