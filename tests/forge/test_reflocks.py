"""Ref locks a killed writer left in a served forge: waited out, then removed.

A receive-pack SIGKILLed inside its ref transaction leaves ``<ref>.lock`` and the ref at
its old value (tests/torture/test_serve_killed_in_push.py kills a real one there). Without
this, every later push of that ref is refused at the lock, which a desk reads as a lost
race. Here the lock is made by hand, its age set with ``os.utime``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import httpx

from assay.forge import ForgeServer, reflocks
from assay.odb import read_ref
from tests.forge_fixtures import put_on_main


def _lock(forge: Path, ref: str, *, age: float) -> Path:
    lock = forge / f"{ref}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("0" * 40 + "\n", encoding="ascii")
    then = time.time() - age
    os.utime(lock, (then, then))
    return lock


def test_a_push_onto_a_ref_a_dead_writer_locked_lands(forge_path: Path) -> None:
    with ForgeServer(forge_path) as server:
        before = put_on_main(server.url, {"briefs/a.md": b"a\n"})
        lock = _lock(forge_path, "refs/heads/main", age=reflocks.STALE_AFTER_S + 60)
        after = put_on_main(server.url, {"briefs/b.md": b"b\n"})
        assert not lock.exists()
        assert read_ref(forge_path, "refs/heads/main") == after != before
        assert server.started["stale-lock"] == 1


def test_a_deletion_of_a_ref_a_dead_writer_locked_lands(forge_path: Path, tmp_path: Path) -> None:
    """A push that only deletes (no pack: receive-pack's to take) is judged at its refs'
    locks too; it used to be refused at the lock for good."""
    with ForgeServer(forge_path) as server:
        main = put_on_main(server.url, {"briefs/a.md": b"a\n"})
        git = ["git", "-C", str(forge_path)]
        subprocess.run([*git, "update-ref", "refs/assay/claims/b1", main], check=True)
        lock = _lock(forge_path, "refs/assay/claims/b1", age=reflocks.STALE_AFTER_S + 60)
        subprocess.run(["git", "init", "-q", str(tmp_path / "pusher")], check=True)
        pushed = subprocess.run(
            ["git", "push", "--porcelain", server.url, ":refs/assay/claims/b1"],
            cwd=tmp_path / "pusher",
            capture_output=True,
            text=True,
            check=False,
        )
        assert pushed.returncode == 0, pushed.stderr
        assert not lock.exists() and read_ref(forge_path, "refs/assay/claims/b1") is None
        assert server.started["stale-lock"] == 1


def test_a_local_push_removes_a_dead_writers_lock(forge_path: Path) -> None:
    """No server on a local forge: the pushing desk itself removes a lock already stale (a
    desk killed inside its push left it), at once."""
    before = put_on_main(forge_path, {"briefs/a.md": b"a\n"})
    old = _lock(forge_path, "refs/heads/main", age=reflocks.STALE_AFTER_S + 60)
    started = time.monotonic()
    after = put_on_main(forge_path, {"briefs/b.md": b"b\n"})
    assert time.monotonic() - started < reflocks.STALE_AFTER_S  # nothing waited for
    assert not old.exists() and read_ref(forge_path, "refs/heads/main") == after != before


def test_a_young_lock_is_waited_for_and_removed_only_once_it_is_stale(forge_path: Path) -> None:
    lock = _lock(forge_path, "refs/heads/x", age=0.0)
    started = time.monotonic()
    removed = reflocks.clear_stale(forge_path, ["refs/heads/x"], stale_after=0.3)
    assert removed == [str(lock)] and not lock.exists()
    assert time.monotonic() - started >= 0.25  # it waited for the lock's age, not less


def test_refs_without_locks_are_left_alone_at_once(forge_path: Path) -> None:
    other = _lock(forge_path, "refs/heads/other", age=3600)
    assert reflocks.clear_stale(forge_path, ["refs/heads/x", "refs/heads/nested/y"]) == []
    assert other.exists()  # only the push's own refs (and packed-refs) are judged


def _pkt(payload: bytes) -> bytes:
    return f"{len(payload) + 4:04x}".encode() + payload


def test_a_push_naming_no_plain_ref_touches_no_file(forge_path: Path) -> None:
    # The ref names come from the client: a name that is not a plain ref (a path out of
    # refs/, a .lock component) never reaches the file system.
    outside = _lock(forge_path, "config", age=3600)
    nested = _lock(forge_path, "refs/heads/x.lock/y", age=3600)
    pack = b"PACK" + (2).to_bytes(4, "big") + (0).to_bytes(4, "big")
    pack += hashlib.sha1(pack).digest()
    with ForgeServer(forge_path) as server:
        main = put_on_main(server.url, {"briefs/a.md": b"a\n"})
        for name in ("refs/heads/../../config", "refs/heads/x.lock/y"):
            command = f"{'0' * 40} {main} {name}\0report-status\n".encode()
            reply = httpx.post(
                f"{server.url}/git-receive-pack",
                content=_pkt(command) + b"0000" + pack,
                headers={"Content-Type": "application/x-git-receive-pack-request"},
                timeout=60,
            )
            assert b"ok " + name.encode() not in reply.content
        assert outside.exists() and nested.exists()
        assert server.started["stale-lock"] == 0
