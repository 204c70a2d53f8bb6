"""Reading a run's process sessions out of its journal entries.

A desk holds a process only while it works: from ``start``, ``takeover`` or ``wake`` to the
``wait`` or ``end`` that lets the process go (or to the last entry before a ``takeover``,
when the process died). The board sets the seconds held beside the run's wall-clock age to
show how much of a long-lived run held no compute at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from assay.board.model import Session, parse_time

_OPENS = frozenset({"start", "takeover", "wake"})
_CLOSES = frozenset({"wait", "end", "budget", "error"})


def entry_time(entry: Mapping[str, Any]) -> datetime | None:
    """When an entry happened: its ``t1``, else ``t``, ``t0`` or ``at``."""
    for key in ("t1", "t", "t0", "at"):
        moment = parse_time(entry.get(key))
        if moment is not None:
            return moment
    return None


def sessions(entries: Iterable[Mapping[str, Any]]) -> tuple[Session, ...]:
    """The process sessions a journal records, in order."""
    found: list[Session] = []
    current_start: datetime | None = None
    current_last: datetime | None = None
    current_fence = 0
    only_openers = True  # a takeover followed by start is one process, not two

    def close() -> None:
        nonlocal current_start, current_last, current_fence, only_openers
        if current_start is not None and current_last is not None:
            found.append(Session(start=current_start, end=current_last, fence=current_fence))
        current_start = current_last = None
        current_fence = 0
        only_openers = True

    for entry in entries:
        kind = str(entry.get("kind", ""))
        moment = entry_time(entry)
        if kind in _OPENS and not only_openers:
            close()
        if kind not in _OPENS:
            only_openers = False
        if moment is None:
            continue
        if current_start is None:
            current_start = moment
        fence = entry.get("fence", 0)
        if isinstance(fence, int):
            current_fence = max(current_fence, fence)
        current_last = moment
        if kind in _CLOSES:
            close()
    close()
    return tuple(found)
