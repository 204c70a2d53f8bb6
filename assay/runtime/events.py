"""The local event store of a ``--journal`` run: ``events.jsonl`` beside the segments.

``assay signal`` and ``assay approve`` append here (locked, fsynced); the runtime reads
it at drain points and waits. On a forge the desk loop supplies events through
``RunHooks.events()`` instead, and this file is not used.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from assay.errors import BadInput
from assay.runtime.types import Event

EVENTS_FILE = "events.jsonl"


class LocalEventStore:
    """Append-only events of one local journal directory."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / EVENTS_FILE

    def append(self, event: Event) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(event.to_json(), sort_keys=True, separators=(",", ":")) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def read(self) -> list[Event]:
        """Every event delivered so far, in order (duplicates included)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        events = []
        lines = text.split("\n")
        if lines and lines[-1]:
            lines[-1] = ""  # an unterminated last line is an append still in progress
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise BadInput(f"{self.path} line {number}: not valid JSON ({exc})") from None
            events.append(Event.from_json(value, where=f"{self.path} line {number}"))
        return events
