"""Keep the supervisor's memory and environment out of reach of what runs beside it.

A process that holds credentials (the desk, the gate) makes itself non-dumpable before it
reads any: ``/proc/<pid>/environ`` and ``/proc/<pid>/mem`` are then refused to other
processes of the same user, even ones outside any sandbox (a row started with
``isolation: off``). ``execve`` resets the flag, so children are unaffected.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3


def make_undumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` on Linux; False where it is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def is_dumpable() -> bool:
    """Whether this process is dumpable (True where that cannot be asked)."""
    if not sys.platform.startswith("linux"):
        return True
    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0))
    except (OSError, AttributeError):
        return True


_TAKEN: dict[str, str] = {}


def take_secret_file(path: str) -> str:
    """The secret in file ``path``, which is then removed: a workflow writes the file in a
    step of its own, so no environment of the step that runs rows (nor of any ancestor)
    holds the secret. Read once per process; later calls get the value read first."""
    if path in _TAKEN:
        return _TAKEN[path]
    from assay.errors import BadInput

    try:
        with open(path, encoding="utf-8") as handle:
            value = handle.read().strip()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the secret file: {exc.strerror or exc}") from None
    with contextlib.suppress(OSError):
        os.unlink(path)
    _TAKEN[path] = value
    return value
