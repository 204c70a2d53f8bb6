"""``python -m tests.torture.desk_driver STATS -- ARGS``: the real ``assay ARGS`` CLI, counting
claim attempts.

Only instrumentation: ``ClaimStore.acquire`` is wrapped to count its calls and the ``Busy``
answers (lost claim races) it raised, and the counts are written to STATS as JSON when the
process exits normally. Nothing else changes; a SIGKILLed desk writes no stats.
"""

from __future__ import annotations

import atexit
import json
import sys
from pathlib import Path
from typing import Any

from assay.claims.store import ClaimStore
from assay.cli.main import main
from assay.errors import Busy

COUNTS = {"acquire_calls": 0, "acquire_busy": 0, "acquired": 0}


def _counting(original: Any) -> Any:
    def acquire(self: ClaimStore, *args: Any, **kwargs: Any) -> Any:
        COUNTS["acquire_calls"] += 1
        try:
            claim = original(self, *args, **kwargs)
        except Busy:
            COUNTS["acquire_busy"] += 1
            raise
        COUNTS["acquired"] += 1
        return claim

    return acquire


def run(argv: list[str]) -> None:
    stats = Path(argv[0])
    rest = argv[2:] if argv[1:2] == ["--"] else argv[1:]
    ClaimStore.acquire = _counting(ClaimStore.acquire)  # type: ignore[method-assign]
    atexit.register(lambda: stats.write_text(json.dumps(COUNTS), encoding="utf-8"))
    main(rest)


if __name__ == "__main__":
    run(sys.argv[1:])
