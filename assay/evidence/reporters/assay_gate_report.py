"""What both reporters share: where to write, the tripwire's message, the report's shape.

The gate hands ``ASSAY_GATE_REPORT`` (``<folder>\\n<nonce>``) to the row; the first reporter
to load takes it out of the environment, so the code under test does not find it there.
"""

from __future__ import annotations

import json
import os
from typing import Any

REPORT_ENV = "ASSAY_GATE_REPORT"
REPORT_VERSION = 1
TRIPWIRE = "assay_gate_tripwire"

_taken: tuple[str, str] | None = None


def take() -> tuple[str, str] | None:
    """(report folder, nonce) for this process, or None when the gate asked for nothing."""
    global _taken
    if _taken is None:
        value = os.environ.pop(REPORT_ENV, "")
        folder, _, nonce = value.partition("\n")
        if folder and nonce:
            _taken = (folder, nonce)
    return _taken


def adopt(value: str) -> None:
    """Take the report folder and nonce from ``value`` (a pytest-xdist worker's input)."""
    global _taken
    folder, _, nonce = value.partition("\n")
    if folder and nonce:
        _taken = (folder, nonce)


def tripwire_message(nonce: str) -> str:
    return f"the gate's tripwire {nonce} fails on purpose"


def write(runner: str, tests: dict[str, str], tripwire: dict[str, str], **extra: Any) -> None:
    """One complete report for this process (written whole, then renamed into place)."""
    where = take()
    if where is None:
        return
    folder, nonce = where
    report = {
        "v": REPORT_VERSION,
        "runner": runner,
        "nonce": nonce,
        "pid": os.getpid(),
        "tests": tests,
        "tripwire": tripwire,
        "complete": True,
        **extra,
    }
    final = os.path.join(folder, f"{runner}-{os.getpid()}-{os.urandom(4).hex()}.json")
    partial = final + ".part"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    os.replace(partial, final)


def started(runner: str) -> None:
    """Leave a mark that ``runner`` started in this process (a report must follow it)."""
    where = take()
    if where is None:
        return
    path = os.path.join(where[0], f"{runner}-{os.getpid()}.started")
    with open(path, "w", encoding="utf-8"):
        pass
