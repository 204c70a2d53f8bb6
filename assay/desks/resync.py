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

from assay.claims.record import skew_from_env
from assay.desks.loop import DeskLoop, RunReport
from assay.desks.review import read_review
from assay.desks.selection import expired
from assay.desks.state import ForgeView, read_view
from assay.errors import BadInput
from assay.forge import Forge

STATES = ("unclaimed", "held", "waiting", "stuck", "in review", "merged", "closed", "cancelled")


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

    def to_json(self) -> dict[str, Any]:
        return {
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


def brief_state(view: ForgeView, brief_id: str, *, skew_s: float | None = None) -> BriefState:
    """Classify one brief from the forge alone."""
    from assay.journal import summarize

    skew = skew_from_env(skew_s)
    claim = view.claims.get(brief_id)
    journal = view.journal(brief_id)
    summary = summarize(journal) if journal is not None else None
    common: dict[str, Any] = {
        "desk": str(getattr(claim, "desk", "") or ""),
        "holder": str(getattr(claim, "holder", "") or ""),
        "fence": int(getattr(claim, "fence", 0) or 0),
        "waiting_for": str(getattr(claim, "waiting_for", "") or ""),
        "last_step": summary.last_step if summary else "",
        "last_time": summary.last_time if summary else "",
        "steps": summary.steps if summary else 0,
    }
    if brief_id in view.merged:
        state = "merged"
    elif claim is None or claim.state == "released":
        state = "cancelled" if brief_id in view.cancelled else "unclaimed"
    elif claim.state == "done":
        review = read_review(view.forge, brief_id)
        state = "in review" if review is not None and review.state == "ready" else "closed"
    elif claim.state == "waiting":
        state = "waiting"
    elif claim.state == "stuck" or expired(claim, now=datetime.now(UTC), skew_s=skew):
        state = "stuck"
    else:
        state = "held"
    return BriefState(brief=brief_id, state=state, **common)


def resync_table(view: ForgeView, *, desk: str | None = None) -> list[BriefState]:
    """Every brief's state (those claimed by ``desk`` only, when given)."""
    rows = [brief_state(view, brief_id) for brief_id in sorted(view.briefs)]
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
    view = read_view(forge)
    rows = resync_table(view, desk=desk)
    reports: list[RunReport] = []
    if desk is None or not resume:
        return rows, reports
    if desk not in desks:
        raise BadInput(f"--desk: no desk {desk!r} in the desks directory")
    loop = _loop(forge, desks[desk], workroot, holder, on_progress)
    owned = [
        row.brief
        for row in rows
        if row.desk == desk and row.state in {"unclaimed", "stuck", "waiting"}
    ]
    for brief_id in owned:
        taken = loop.claim_next(only=brief_id, view=view)
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
