"""``assay resync`` and ``assay wake``: the true state of every brief, rebuilt from the forge.

Nothing local is trusted: the state of a brief is read from main (the brief, merged work),
its claim ref, its review ref, its events and the journal on its branch. ``resync --desk``
then resumes the runs that desk should own (released, crashed, or woken); ``wake`` resumes
every waiting run whose event or timer has arrived, under the desk that claimed it. A desk
started on a fresh clone on another machine therefore continues a crashed run from the
forge alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assay.desks.host.loop import DeskLoop, RunReport
from assay.desks.records.state import read_view, wait_until
from assay.errors import BadInput
from assay.forge import Forge
from assay.states import RESUMABLE


@dataclass(frozen=True)
class BriefState:
    """One row of ``assay resync``."""

    brief: str
    state: str
    desk: str = ""
    holder: str = ""
    fence: int = 0
    waiting_for: str = ""
    last_step: str = ""
    last_time: str = ""
    steps: int = 0
    problem: str = ""  # why the state is ``invalid`` (a bad record, an edited or cut journal)

    def to_json(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "brief": self.brief,
            "state": self.state,
            "desk": self.desk,
            "holder": self.holder,
            "fence": self.fence,
            "waiting_for": self.waiting_for,
            "last_step": self.last_step,
            "last_time": self.last_time,
            "steps": self.steps,
        }


def resync_table(forge: Forge, *, desk: str | None = None) -> list[BriefState]:
    """Every brief's state (those of ``desk`` only, when given), as the board judges it:
    one read of the forge, one classification (``assay.states.classify``)."""
    from assay.forgestate.rows import collect_board
    from assay.forgestate.times import iso

    board, _ = collect_board(forge, now=datetime.now(UTC))
    rows = [
        BriefState(
            brief=row.id,
            state=row.state,
            desk=row.desk,
            holder=row.holder,
            fence=row.fence,
            waiting_for=row.waiting_for,
            last_step=row.last_step,
            last_time=iso(row.run_last) if row.run_last else "",
            steps=row.steps,
            problem=row.status_note if row.state == "invalid" else "",
        )
        for row in sorted(board.rows, key=lambda r: r.id)
    ]
    if desk is not None:
        rows = [row for row in rows if row.desk in {desk, ""}]
    return rows


def resync(
    forge: Forge,
    desks: dict[str, Any],
    *,
    desk: str | None,
    workroot: Path,
    holder: str | None = None,
    resume: bool = True,
    on_progress: Callable[[str], None] = lambda line: None,
) -> tuple[list[BriefState], list[RunReport]]:
    """Rebuild the state table; with ``desk``, resume the runs that desk should own."""
    rows = resync_table(forge, desk=desk)
    reports: list[RunReport] = []
    if desk is None or not resume:
        return rows, reports
    if desk not in desks:
        raise BadInput(f"--desk: no desk {desk!r} in the desks directory")
    loop = _loop(forge, desks[desk], workroot, holder, on_progress)
    owned = [row.brief for row in rows if row.desk == desk and row.state in RESUMABLE]
    for brief_id in owned:
        taken = loop.claim_next(only=brief_id)
        if taken is not None:
            reports.append(loop.run_claimed(*taken))
    return rows, reports


def wake(
    forge: Forge,
    desks: dict[str, Any],
    *,
    workroot: Path,
    only: str | None = None,
    holder: str | None = None,
    on_progress: Callable[[str], None] = lambda line: None,
) -> list[RunReport]:
    """Resume every waiting run whose event or timer has arrived (or just ``only``)."""
    view = read_view(forge)
    if only is not None:
        view.require(only)
    reports: list[RunReport] = []
    for brief_id, claim in sorted(view.claims.items()):
        if only is not None and brief_id != only:
            continue
        if claim.state != "waiting" or brief_id not in view.briefs:
            continue
        manifest = desks.get(claim.desk)
        if manifest is None:
            on_progress(f"{brief_id}: desk {claim.desk!r} is not in the desks directory")
            continue
        loop = _loop(forge, manifest, workroot, holder, on_progress)
        taken = loop.claim_next(only=brief_id, view=view)
        if taken is not None:
            reports.append(loop.run_claimed(*taken))
    return reports


def next_timer(forge: Forge) -> datetime | None:
    """When the earliest timer wait of a waiting run ends (a ``run.sleep``, a wait with a
    timeout, a ``cli`` run's wait for model capacity), or None when no run waits on one."""
    view = read_view(forge)
    found = [
        until
        for brief_id, claim in view.claims.items()
        if claim.state == "waiting" and brief_id in view.briefs
        if (until := wait_until(view.journal(brief_id))) is not None
    ]
    return min(found, default=None)


def _loop(
    forge: Forge,
    manifest: Any,
    workroot: Path,
    holder: str | None,
    on_progress: Callable[[str], None],
) -> DeskLoop:
    loop = DeskLoop(
        forge=forge,
        desk=manifest,
        desks_dir=manifest.base_dir,
        workroot=workroot / manifest.name,
        on_progress=on_progress,
    )
    if holder:
        loop.holder = holder
    return loop
