"""Benchmark: the record log's work on the in-memory backend beside the git forge.

The same record logic (``RefLog``: append with compare-and-swap, read every record back,
lose a race and append on top) run against ``MemoryForge`` and against a real embedded
forge (a bare repository on disk), in one run: what the in-memory backend saves a test of
the record logic. ``python -m tests.bench.records [--records N]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.forge import open_forge
from assay.forge.embedded import init_forge
from assay.forge.memory import MemoryForge
from assay.forge.records import RecordBackend, RefLog
from assay.plumbing import Identity

REF = "refs/assay/status/bench"
WRITER = Identity("bench", "bench@example.invalid")


def _work(backend: RecordBackend, records: int) -> None:
    """``records`` appends, a lost race every tenth, and a full read after each tenth."""
    log, rival = RefLog(backend, REF, kind="status"), RefLog(backend, REF, kind="status")
    for n in range(records):
        if n % 10 == 9:
            rival.append({"n": n, "by": "rival"}, author=WRITER)  # log's next CAS loses
        log.append({"n": n}, author=WRITER)
        if n % 10 == 9:
            assert len(RefLog(backend, REF, kind="status").read()) == n + 1 + (n + 1) // 10


def _timed(make: Callable[[], Any], records: int) -> float:
    with make() as backend:
        started = time.perf_counter()
        _work(backend, records)
        return time.perf_counter() - started


class _Memory:
    def __enter__(self) -> MemoryForge:
        return MemoryForge()

    def __exit__(self, *_: object) -> None:
        return None


def measure(*, records: int = 100) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="assay-bench-records-") as scratch:
        bare = Path(scratch) / "forge.git"
        init_forge(bare)
        git_s = _timed(lambda: open_forge(str(bare)), records)
    return {"records": records, "memory_s": _timed(_Memory, records), "git_s": git_s}


def rows(found: dict[str, float]) -> list[tuple[str, str, str]]:
    n = int(found["records"])
    return [
        (
            f"records: {n} appends, races and reads on the in-memory backend",
            f"{found['memory_s'] * 1000:.0f} ms",
            f"the git forge: {found['git_s'] * 1000:.0f} ms "
            f"({found['git_s'] / max(found['memory_s'], 1e-9):.0f}x)",
        )
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=100)
    options = parser.parse_args(argv)
    for name, value, compared in rows(measure(records=options.records)):
        print(f"{name}: {value}; {compared}")


if __name__ == "__main__":
    main()
