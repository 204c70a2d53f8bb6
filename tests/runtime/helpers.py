"""Helpers for runtime tests: the desks folder, polling with a deadline, journal queries."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DESKS = Path(__file__).resolve().parent / "desks"


def desk(name: str) -> str:
    """``PATH.py:FUNCTION`` of a test desk."""
    return f"{DESKS / name}"


def wait_until(condition: Callable[[], Any], *, timeout: float = 30.0, what: str = "") -> Any:
    """Poll ``condition`` until it is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.005)  # polling a file, not synchronising by time


def results_by_pos(entries: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Completed step results keyed by position."""
    return {
        int(e["pos"]): e
        for e in entries
        if e["kind"] == "step" and e.get("status") in {"ok", "error"}
    }
