"""``summarize()``: the few facts about a journal that the board and sweepers show."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from assay.journal.fold import fold, step_label
from assay.journal.reader import Journal

__all__ = ["JournalSummary", "step_label", "summarize"]


@dataclass(frozen=True)
class JournalSummary:
    """Counts, cost and position of a run, read from its journal alone."""

    entries: int = 0
    steps: int = 0
    model_calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    last_step: str = ""  # label of the last step, e.g. "model" or "tool:write_file"
    last_time: str = ""  # ISO-8601 UTC time of the last entry
    last_kind: str = ""  # kind of the last entry: end, wait, step, …
    status: str = "new"  # new | running | waiting | paused | done | failed
    waiting_for: str | None = None
    fence: int = 0
    head: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(journal: Journal) -> JournalSummary:
    """Summarize a verified journal (see ``JournalSummary``): a view of its fold."""
    facts = fold(journal.entries)
    return JournalSummary(
        entries=facts.entries,
        steps=facts.totals.steps,
        model_calls=facts.totals.model_calls,
        tokens=facts.totals.tokens,
        usd=facts.totals.usd,
        last_step=facts.last_step,
        last_time=facts.last_time,
        last_kind=facts.last_kind,
        status=facts.status,
        waiting_for=facts.waiting_for,
        fence=journal.fence,
        head=journal.head,
    )
