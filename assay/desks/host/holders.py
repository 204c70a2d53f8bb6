"""A holder token's local lock: proof that no live process on this machine runs under it.

A desk loop holds an exclusive ``flock`` on ``<forge state>/holders/<token digest>.lock``
while it runs. The kernel drops the lock when the process dies, however it dies, so a new
loop that gets the lock knows that every claim still ``held`` under its token belongs to
a process that is gone: a desk restarted with its own ``--holder`` takes its briefs back
at once instead of waiting out the lease. A token names one process on one machine (the
default token is host, pid and a random suffix); a second live loop under the same token
is refused, since two processes must never hold one claim.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from pathlib import Path

from assay.closing import Closing
from assay.errors import Busy, Unavailable


class HolderLock(Closing):
    """The lock of one holder token under ``directory``, held until ``close()``."""

    def __init__(self, directory: Path, holder: str) -> None:
        digest = hashlib.sha256(holder.encode()).hexdigest()[:32]
        self.path = Path(directory) / "holders" / f"{digest}.lock"
        self.holder = holder
        self._fd: int | None = None

    @classmethod
    def take(cls, directory: Path, holder: str) -> HolderLock:
        """The lock of ``holder``, taken; ``Busy`` naming the pid when a live process
        holds it."""
        lock = cls(directory, holder)
        lock._acquire()
        return lock

    def _acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise Unavailable(
                f"{self.path}: cannot open the holder's lock ({exc.strerror})"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise Busy(
                    f"holder {self.holder!r} is in use by a running desk process on this "
                    f"machine (pid {owner}): give this one another --holder",
                    status="held",
                ) from None
            raise Unavailable(f"{self.path}: cannot lock it ({exc.strerror})") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def close(self) -> None:
        """Release the lock (closing the file is what releases a ``flock``)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
