"""The replay index: what the journal recorded at each position the code asks for.

Desk code asks for things in order (a step, a checkpoint, a drain of signals, a wait);
each request is a *position* (``pos``, 1-based). The index maps positions to the entries
recorded there, honouring fork-on-divergence: a ``diverged`` entry at position p archives
everything recorded at p and later, so new entries from p on are what replay sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.journal.summary import step_label

POSITIONAL = frozenset({"step", "checkpoint", "signal", "wait", "wake", "compensate", "denied"})


@dataclass
class Recorded:
    """The entries recorded at one position."""

    pos: int
    label: str
    intent: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    wait: dict[str, Any] | None = None
    wake: dict[str, Any] | None = None
    other: dict[str, Any] | None = None  # checkpoint, signal or denied


def label_of(entry: dict[str, Any]) -> str:
    """The label of a positional entry, as divergence messages name it."""
    kind = entry["kind"]
    if kind in {"step", "denied"}:
        return step_label(str(entry.get("step", "")), str(entry.get("name", "")))
    if kind == "compensate":
        return f"compensate:{entry.get('name', '')}"
    if kind in {"wait", "wake"}:
        return "sleep" if entry.get("sleep") else f"wait:{entry.get('for', '')}"
    if kind == "signal":
        return "signals"
    return str(kind)


@dataclass
class Totals:
    """What the recorded steps used, for budgets (archived steps count: they were paid)."""

    steps: int = 0
    model_calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    wall_s: float = 0.0

    def add(self, entry: dict[str, Any]) -> None:
        self.steps += 1
        if entry.get("step") == "model":
            self.model_calls += 1
        usage = entry.get("usage")
        if usage:
            self.tokens += int(usage.get("in_tokens", 0)) + int(usage.get("out_tokens", 0))
            self.usd += float(usage.get("usd", 0.0))
        self.wall_s += float(entry.get("ms", 0)) / 1000.0


@dataclass
class History:
    """Positions -> recorded entries, the event ids already consumed, usage totals and
    the blobs already listed by some line: everything a resume needs, in one pass."""

    positions: dict[int, Recorded] = field(default_factory=dict)
    consumed: set[str] = field(default_factory=set)
    end: dict[str, Any] | None = None
    start: dict[str, Any] | None = None
    totals: Totals = field(default_factory=Totals)
    listed: set[str] = field(default_factory=set)

    @classmethod
    def build(cls, entries: list[dict[str, Any]]) -> History:
        history = cls()
        totals, listed = history.totals, history.listed
        for entry in entries:
            kind = entry["kind"]
            blobs = entry.get("blobs")
            if blobs:
                listed.update(blobs)
            if kind == "step" and entry.get("status") != "started":
                totals.add(entry)
            if kind == "start" and history.start is None:
                history.start = entry
            elif kind == "end":
                history.end = entry
            elif kind == "diverged":
                history.archive_from(int(entry["pos"]))
            elif kind in POSITIONAL:
                history.add(entry)
        for rec in history.positions.values():
            for event in _events_of(rec):
                history.consumed.add(str(event.get("id")))
        return history

    def add(self, entry: dict[str, Any]) -> None:
        pos = int(entry["pos"])
        rec = self.positions.get(pos)
        if rec is None:
            rec = self.positions[pos] = Recorded(pos, label_of(entry))
        kind = entry["kind"]
        if kind in {"step", "compensate"}:
            if entry.get("status") == "started":
                rec.intent = entry
            else:
                rec.result = entry
        elif kind == "wait":
            rec.wait = entry
        elif kind == "wake":
            rec.wake = entry
        else:
            rec.other = entry

    def archive_from(self, pos: int) -> None:
        for stale in [p for p in self.positions if p >= pos]:
            del self.positions[stale]

    @property
    def last_pos(self) -> int:
        return max(self.positions, default=0)


def _events_of(rec: Recorded) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if rec.other is not None and rec.other["kind"] == "signal":
        found.extend(e for e in rec.other.get("events", []) if isinstance(e, dict))
    if rec.wake is not None and isinstance(rec.wake.get("event"), dict):
        found.append(rec.wake["event"])
    return found
