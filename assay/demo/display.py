"""Live progress for ``assay demo``: a table of briefs and a log of what just happened.

On a terminal the table redraws in place (rich ``Live``); elsewhere each event is one plain
line on stderr; with ``--json`` nothing but the final JSON reaches stdout.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

STATE_STYLES = {
    "queued": "dim",
    "held": "cyan",
    "waiting": "yellow",
    "stuck": "red",
    "expired": "red",
    "verifying": "magenta",
    "merged": "green",
    "blocked": "bold red",
}
RECENT_EVENTS = 8


class _Progress(Protocol):
    state: str
    desk: str
    fence: int


class Display:
    """Where the demo reports progress; quiet when ``enabled`` is false."""

    def __init__(self, console: Console, *, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.began = time.monotonic()
        self.events: list[str] = []
        self.live: Live | None = None
        if enabled and console.is_terminal:
            self.live = Live(console=console, refresh_per_second=8, transient=False)
            self.live.start()
        self._rows: Mapping[str, Any] = {}

    def event(self, text: str) -> None:
        stamped = f"{time.monotonic() - self.began:5.1f}s  {text}"
        self.events.append(stamped)
        if not self.enabled:
            return
        if self.live is None:
            self.console.print(stamped, markup=False, highlight=False)
        else:
            self._redraw()

    def update(self, rows: Mapping[str, Any]) -> None:
        self._rows = rows
        if self.live is not None:
            self._redraw()

    def _redraw(self) -> None:
        assert self.live is not None
        table = Table(title="assay demo", expand=False)
        for column in ("brief", "state", "desk", "fence"):
            table.add_column(column)
        for brief, progress in self._rows.items():
            style = STATE_STYLES.get(progress.state, "")
            table.add_row(
                brief, Text(progress.state, style=style), progress.desk, str(progress.fence or "")
            )
        recent = Text("\n".join(self.events[-RECENT_EVENTS:]))
        self.live.update(Group(table, recent))

    def close(self) -> None:
        if self.live is not None:
            self._redraw()
            self.live.stop()
            self.live = None
