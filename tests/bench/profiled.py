"""``python -m tests.bench.profiled OUT ARGS...``: ``assay ARGS`` under cProfile, every thread.

cProfile alone sees the main thread, and a desk's gateway serves its calls on threads of
its own. Each thread here gets a profiler of its own on its first event, timed with that
thread's CPU clock (``time.thread_time``): waiting on a socket or a child costs nothing, so
the figures add up to the process's own CPU time (give or take the profiler's overhead,
which inflates small Python functions most). At exit they are merged into ``OUT``
(``pstats``), which ``top()`` prints.
"""

from __future__ import annotations

import atexit
import cProfile
import io
import pstats
import sys
import threading
import time
from typing import Any

_PROFILES: list[cProfile.Profile] = []
_LOCK = threading.Lock()


def _start_here(*_: Any) -> None:
    sys.setprofile(None)
    profile = cProfile.Profile(time.thread_time)
    with _LOCK:
        _PROFILES.append(profile)
    profile.enable()


def _dump(path: str) -> None:
    for profile in _PROFILES:
        profile.disable()
    stats = pstats.Stats(_PROFILES[0])
    for profile in _PROFILES[1:]:
        stats.add(profile)
    stats.dump_stats(path)


def top(path: str, *, limit: int = 40, sort: str = "cumulative") -> str:
    """The ``limit`` heaviest functions of the profile at ``path``."""
    out = io.StringIO()
    pstats.Stats(path, stream=out).sort_stats(sort).print_stats(limit)
    return out.getvalue()


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    threading.setprofile(_start_here)
    _start_here()
    atexit.register(_dump, out)
    sys.argv = ["assay", *args]
    from assay.cli.main import main as assay_main

    try:
        assay_main()
    finally:
        _dump(out)
        atexit.unregister(_dump)


if __name__ == "__main__":
    main()
