"""Ref locks a killed git process left behind in a served forge.

git moves a ref by creating ``<ref>.lock``, writing the new value into it and renaming it
over the ref. A receive-pack SIGKILLed between the two (the forge server killed inside its
ref transaction) leaves the lock file and the ref at its old value, and every later push of
that ref is refused at the lock ("failed to update ref"), which a desk cannot tell from a
lost race: the brief would be wedged until someone removed the file by hand.

A local forge (``file://``) has no server: the desk that takes a push into it in process
(:func:`assay.forge.receivepack.take_locally`) applies the same rule first, so a desk killed
inside its own push holds the next holder up five seconds at most, never for good.

A live holder keeps a ref lock for milliseconds (git takes it after the pre-receive hook and
drops it on commit), so before a push is handed to receive-pack the server waits for each
of its refs' locks to go, for at most :data:`STALE_AFTER_S` of the lock's age, and then
removes a lock that old: its writer is gone. The wait is bounded and only ever happens on a
ref that is locked when its push arrives.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

STALE_AFTER_S = 5.0  # a lock this old has no live writer (git holds one for milliseconds)
_POLL_S = 0.05
_CLEARING = threading.Lock()  # two pushes of one ref must not both judge and remove its lock


def clear_stale(
    git_dir: Path, refs: Iterable[str], *, stale_after: float = STALE_AFTER_S
) -> list[str]:
    """Wait out, then remove, the stale locks of ``refs`` (and of ``packed-refs``); the
    lock files removed."""
    removed = []
    for lock in [git_dir / f"{ref}.lock" for ref in refs] + [git_dir / "packed-refs.lock"]:
        if _wait_or_remove(lock, stale_after):
            removed.append(str(lock))
    return removed


def _wait_or_remove(lock: Path, stale_after: float) -> bool:
    pause = threading.Event()
    while True:
        try:
            seen = lock.stat()
        except (FileNotFoundError, NotADirectoryError):
            return False
        age = time.time() - seen.st_mtime
        if age < stale_after:
            pause.wait(min(_POLL_S, stale_after - age))  # a live writer is done in ms
            continue
        with _CLEARING:
            try:
                now = lock.stat()
            except FileNotFoundError:
                return False
            if (now.st_ino, now.st_mtime_ns) != (seen.st_ino, seen.st_mtime_ns):
                continue  # another writer took the lock meanwhile: judge it afresh
            os.unlink(lock)
        return True
