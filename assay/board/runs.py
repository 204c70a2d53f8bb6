"""Run pages: one HTML page per brief's run, linked from the board's HTML page.

A run page is a view of the run's journal at its checkpoint (the journal ref's tip; once
merged, the run ref that kept it, so a branch or journal ref deleted after the merge loses
nothing; the branch of a run written before the journal ref), read with
``assay.branch.read_branch_journal`` (the one way a journal is read from a commit) and drawn
through ``assay.runtime.timeline``: the rows ``assay history --brief`` prints, each
model call with what the model said, each tool step with its output and what it cost,
where a process stopped and where the next one resumed, the requests sent upstream again.
Beside them: the board's row for the brief (its state, why it is there, its totals) and
the evidence, as the gate's records on the brief's evidence ref and the desk's own claim
list it. The board's evidence column stays the judgement; the page shows what it judged.

``build_run_pages`` only reads; ``assay.board.render.render_run_pages`` renders them and
``assay board`` writes each to ``runs/<brief>.html`` beside the board's page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import AssayError, BadInput
from assay.forgestate.rows import BoardState, BriefRow
from assay.forgestate.snapshot import EvidenceInfo, ForgeSnapshot
from assay.ids import check_id
from assay.runtime.timeline import Row, Timeline, build_timeline

RUNS_DIR = "runs"


def page_href(brief: str) -> str:
    """Where a brief's run page is, relative to the board's page: ``runs/<brief>.html``."""
    return f"{RUNS_DIR}/{check_id(brief)}.html"


@dataclass(frozen=True)
class EvidenceLine:
    """One row's evidence as recorded: the gate's latest record of it, or the desk's claim."""

    row: str
    result: str  # pass | fail | not run
    source: str  # "gate" (a record on the evidence ref) or "desk's claim" (its journal)
    head: str = ""  # the commit the gate ran it at (12 characters)
    at: str = ""
    by: str = ""  # the record's verifier
    current: bool = False  # recorded at the branch's tip


@dataclass(frozen=True)
class Line:
    """One timeline row, and what kind of moment it is for the page's style (``css``)."""

    row: Row
    css: str  # entry | detail, plus stopped / resumed / repeated / wait / evidence / error


@dataclass(frozen=True)
class RunPage:
    """Everything one run page shows."""

    row: BriefRow
    tip: str  # the code the run is judged at: the branch's tip, else its review's head
    lines: tuple[Line, ...] = ()
    summary: str = ""  # the timeline's sentence of counts
    problem: str = ""  # why the journal could not be read (the page says so, and no more)
    evidence: tuple[EvidenceLine, ...] = ()
    stops: int = 0  # processes that stopped without closing the run (killed, lease lost)

    @property
    def href(self) -> str:
        return page_href(self.row.id)


def build_run_pages(
    forge: Any, snapshot: ForgeSnapshot, state: BoardState, scratch: Path
) -> list[RunPage]:
    """The run page of every brief of ``state`` with a checkpoint (a journal may be on it),
    its journal materialised under ``scratch`` (each in its own ``.assay/journal/<brief>``:
    one folder a brief, since removing thousands of folders costs more than reading them);
    ids unsafe as a file name get none."""
    from assay.branch import read_branch_journal

    pages = []
    for row in sorted(state.rows, key=lambda r: r.id):
        checkpoint = snapshot.checkpoint(row.id)
        if not checkpoint or not _safe(row.id):
            continue
        tip = snapshot.branch(row.id) or snapshot.review_heads.get(row.id, "")
        evidence = _evidence(snapshot, row.id, tip)
        try:
            journal = read_branch_journal(forge, checkpoint, row.id, scratch)
        except AssayError as error:
            pages.append(RunPage(row, tip, problem=error.message, evidence=evidence))
            continue
        if journal is None:
            continue
        timeline = build_timeline(journal)
        pages.append(
            RunPage(
                row,
                tip,
                lines=_lines(timeline),
                summary=timeline.summary(),
                evidence=evidence,
                stops=len(timeline.facts.interruptions),
            )
        )
    return pages


def _safe(brief: str) -> bool:
    try:
        check_id(brief)
    except BadInput:
        return False
    return True


def _lines(timeline: Timeline) -> tuple[Line, ...]:
    resumed = {str(stop.resumed_seq) for stop in timeline.facts.interruptions}
    return tuple(_line(row, resumed) for row in timeline.rows)


_MARKED = frozenset({"stopped", "repeated", "wait", "wake", "evidence", "said", "asks"})


def _line(row: Row, resumed: set[str]) -> Line:
    css = ["entry" if row.seq else "detail"]
    if row.kind in _MARKED:
        css.append(row.kind)
    if row.seq and row.seq in resumed:
        css.append("resumed")
    if row.status == "error":
        css.append("error")
    return Line(row, " ".join(css))


def _evidence(snapshot: ForgeSnapshot, brief: str, tip: str) -> tuple[EvidenceLine, ...]:
    """Each acceptance row (the brief's on main, then any other a record names): the gate's
    latest record of it, and the desk's claim when its journal made one."""
    info = snapshot.briefs.get(brief)
    latest: dict[str, EvidenceInfo] = {}
    for record in snapshot.evidence.get(brief, ()):  # oldest first: the last one stands
        latest[record.row] = record
    journal = snapshot.journals.get(brief)
    claimed: Mapping[str, str] = journal.claimed if journal is not None else {}
    holdout = [row for row, _ in snapshot.holdout.get(brief, ())]
    names = _ordered([*(info.rows if info else ()), *holdout, *latest, *claimed])
    found = []
    for name in names:
        gate = latest.get(name)
        if gate is None:
            found.append(EvidenceLine(name, "not run", "gate"))
        else:
            found.append(
                EvidenceLine(
                    name,
                    "pass" if gate.passed else "fail",
                    "gate",
                    head=gate.head_sha[:12],
                    at=gate.at,
                    by=str(getattr(gate.record, "verifier", "") or ""),
                    current=bool(tip) and gate.head_sha == tip,
                )
            )
        if name in claimed:
            found.append(EvidenceLine(name, str(claimed[name]), "desk's claim"))
    return tuple(found)


def _ordered(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


__all__ = ["EvidenceLine", "Line", "RunPage", "build_run_pages", "page_href"]
