"""``Replayer``: replay a journal against current code without running anything live.

Tests and ``assay replay`` share it. Replay stops at the journal's end (a match), at the
first divergence (reported with the position, recorded and requested step), or when the
code finishes (a match only if the journal records nothing further).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.errors import AssayError, Diverged, Failed, Paused, Suspension
from assay.journal import Journal, load_packed, read_journal
from assay.models.base import ModelAdapter
from assay.runtime.execute import DeskFunction
from assay.runtime.run import EndOfHistory, Run
from assay.runtime.shapes import to_json_value
from assay.runtime.types import ToolRunner


@dataclass
class ReplayResult:
    """What a replay found: ``failure`` is None when the code matches the journal."""

    history: list[dict[str, Any]] = field(default_factory=list)
    failure: AssayError | None = None
    positions: int = 0  # how many positions the code replayed
    finished: bool = False  # the code ran to its end inside the journal
    output: Any = None

    @property
    def matched(self) -> bool:
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "positions": self.positions,
            "finished": self.finished,
            "entries": len(self.history),
            "failure": self.failure.to_json() if self.failure else None,
        }


class Replayer:
    """Replays journals against one desk function."""

    def __init__(
        self,
        fn: DeskFunction,
        *,
        model: ModelAdapter | None = None,
        tools: ToolRunner | None = None,
    ) -> None:
        self.fn = fn
        self.model = model
        self.tools = tools

    def replay(self, journal: Journal | Path) -> ReplayResult:
        """Replay ``journal`` (a verified ``Journal`` or a directory to read and verify)."""
        if not isinstance(journal, Journal):
            journal = read_journal(Path(journal))
        run = Run.for_replay(journal, model=self.model, tools=self.tools)
        result = ReplayResult(history=journal.entries)
        start = run.history.start
        given = load_packed(journal.directory, start.get("in")) if start else None
        try:
            try:
                output = self.fn(run, given)
                run.finished_replay()
                result.finished = True
                result.output = to_json_value(output, label="the run's output")
                end = run.history.end
                if end is not None and end.get("status") == "ok":
                    recorded = load_packed(journal.directory, end.get("out"))
                    if recorded != result.output:
                        result.failure = Diverged(
                            "the code's output differs from the recorded output of the run"
                        )
            except Diverged as diverged:
                result.failure = diverged
            except (Suspension, Paused, EndOfHistory):
                pass
            except (Failed, Exception) as failure:
                if isinstance(failure, AssayError) and not isinstance(failure, Failed):
                    raise
                run.compensate()
                result.finished = True
        except EndOfHistory:
            pass
        except Diverged as diverged:
            result.failure = diverged
        result.positions = run.pos
        return result
