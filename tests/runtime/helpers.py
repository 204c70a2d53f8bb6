"""Helpers for runtime tests: the desks folder, polling with a deadline, journal queries,
hooks that approve every wait, a model whose every reply is new."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.models.base import Message, ModelReply, ToolSpec, Usage
from assay.runtime import Event

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


class Approve:
    """Run hooks that answer every wait with one ``approve`` event."""

    def durability_point(self, reason: str) -> None: ...
    def heartbeat(self, progress: dict[str, Any]) -> None: ...
    def ensure_owner(self) -> None: ...
    def events(self) -> list[Event]:
        return [Event("e1", "approve")]


class Talker:
    """Replies with a distinct message of about ``size`` bytes each turn."""

    name = "talker"
    context_window = 10_000_000

    def __init__(self, size: int = 600) -> None:
        self.size = size

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        turn = len(messages) // 2
        return ModelReply(
            {"role": "assistant", "content": f"answer {turn}: " + "a" * self.size}, Usage(10, 10)
        )
