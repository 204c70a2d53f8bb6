"""``assay desk run``: take briefs from the forge and run them, one durable run at a time.

One iteration: read the forge (briefs on main, claims, merged branches, cancellations) in
a few round trips, choose the highest-priority brief this desk ``takes`` whose dependencies
are merged (``assay.desks.selection``), claim it by CAS push, check out ``assay/<brief>``,
resume or start its journal through ``execute`` with hooks that commit and CAS-push at every
durability point, renew the lease, re-check ownership before effects and read the brief's
events; then open or update the review record, mark the claim done or waiting, and go on
with the next brief unless ``--once``.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assay.briefs import Brief
from assay.claims import Claim, ClaimStore
from assay.desks.objectives import REQUEUE
from assay.desks.objectives import WAITING_FOR as WAITING_FOR_OBJECTIVE
from assay.desks.review import read_review, render_body, write_review
from assay.desks.selection import Candidate, Why, queue
from assay.desks.session import Session, budget_for
from assay.desks.state import ForgeView, read_view
from assay.errors import AssayError, BadInput, Busy, Failed, Fenced, Paused, Suspended
from assay.evidence import with_table
from assay.evidence.gate import review_table
from assay.forge import Forge
from assay.journal import Redactor
from assay.runtime import execute

# How each run outcome leaves the claim and the review.
_CLAIM_AFTER = {
    0: "done",
    1: "done",
    7: "waiting",
    75: "waiting",
    69: "release",
    77: "done",
}


def default_holder() -> str:
    """A holder token unique to this process: host, pid and a random suffix."""
    token = os.environ.get("ASSAY_HOLDER")
    if token:
        return token
    host = "".join(c if c.isalnum() or c in "-_." else "-" for c in socket.gethostname())
    return f"{host or 'host'}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass
class RunReport:
    """What one run of one brief did, for the CLI's table or ``--json``."""

    brief: str
    why: str
    status: str
    code: int
    steps: int = 0
    waiting_for: str | None = None
    review: str = ""
    head_sha: str = ""
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "brief": self.brief,
            "why": self.why,
            "status": self.status,
            "code": self.code,
            "steps": self.steps,
            "waiting_for": self.waiting_for,
            "review": self.review,
            "head_sha": self.head_sha,
            "message": self.message,
        }


@dataclass
class DeskLoop:
    """One desk process: the forge, the desk's manifest, and where it checks briefs out."""

    forge: Forge
    desk: Any  # DeskManifest
    desks_dir: Path
    workroot: Path
    holder: str = field(default_factory=default_holder)
    skew_s: float | None = None  # default: ASSAY_CLAIM_SKEW or 30 s
    on_progress: Callable[[str], None] = lambda line: None

    def __post_init__(self) -> None:
        self.store = ClaimStore(self.forge, skew_s=self.skew_s)
        self.skew_s = self.store.skew_s
        # Briefs whose run this process could not continue (diverged, corrupt, a bug):
        # released for a human or another build, but not retaken by this process.
        self.given_up: set[str] = set()

    # ------------------------------------------------------------------ choosing

    def view(self) -> ForgeView:
        view = read_view(self.forge)
        view.budget_left = self.budget_left
        return view

    def budget_left(self, brief: Brief, summary: Any) -> bool:
        """Whether a budget-paused run may go on: every limit is above what it used."""
        budget = budget_for(brief, self.desk)
        used = {
            "steps": summary.steps,
            "model_calls": summary.model_calls,
            "tokens": summary.tokens,
            "usd": summary.usd,
        }
        return all(
            getattr(budget, name) is None or value < getattr(budget, name)
            for name, value in used.items()
        )

    def candidates(self, view: ForgeView, *, only: str | None = None) -> list[Candidate]:
        briefs: dict[str, Any] = dict(view.briefs)
        return queue(
            briefs,
            view.claims,
            desk_takes=self.desk.takes_brief,
            merged=view.merged,
            cancelled=view.cancelled,
            arrived=view.arrived,
            now=datetime.now(UTC),
            skew_s=float(self.store.skew_s),
            only=only,
            spread=self.holder,
        )

    def claim_next(self, *, only: str | None = None) -> tuple[Brief, Claim, Why] | None:
        """Claim the first candidate whose CAS push this holder wins, or None."""
        view = self.view()
        if only is not None:
            view.require(only)
        for candidate in self.candidates(view, only=only):
            if candidate.brief in self.given_up:
                continue
            try:
                claim = self.store.acquire(
                    candidate.brief,
                    self.desk.name,
                    lease_s=float(self.desk.lease),
                    holder=self.holder,
                    allow_waiting=candidate.why in {Why.WAKE, Why.CANCEL},
                )
            except Busy:
                continue  # another desk won this one; the next candidate
            return view.briefs[candidate.brief], claim, candidate.why
        return None

    # ------------------------------------------------------------------ running

    def run(self, *, once: bool = False, only: str | None = None) -> list[RunReport]:
        """Take and run briefs until none is claimable (or one, with ``once``/``only``)."""
        reports: list[RunReport] = []
        while True:
            taken = self.claim_next(only=only)
            if taken is None:
                break
            brief, claim, why = taken
            report = self.run_claimed(brief, claim, why)
            reports.append(report)
            if report.code == Fenced.code or once or only is not None:
                break
        return reports

    def run_claimed(self, brief: Brief, claim: Claim, why: Why) -> RunReport:
        """Run one claimed brief to its next stop and leave claim and review consistent."""
        self.on_progress(f"{brief.id}: {why.value} (fence {claim.fence})")
        if why is Why.CANCEL:
            return self._close_cancelled(brief, claim)
        try:
            session = Session.open(
                forge=self.forge,
                brief=brief,
                claim=claim,
                desk=self.desk,
                workroot=self.workroot,
                store=self.store,
                holder=self.holder,
            )
        except AssayError as error:
            # Could not even start (a bad model config, the forge went away): give the
            # brief back at once rather than let it sit under a lease nobody renews.
            self.given_up.add(brief.id)
            self.store.release(claim, note=f"{error.status}: {error.message}"[:300])
            return RunReport(brief.id, why.value, error.status, error.code, message=error.message)
        try:
            result = execute(session.entry, {"brief": brief.id}, **session.run_options())
            code, status = int(result.code), str(result.status)
            output, waiting_for = result.output, result.waiting_for
            steps = int(result.steps)
            message = ""
        except AssayError as error:
            code, status, output, waiting_for, steps = error.code, error.status, None, None, 0
            message = error.message
        finally:
            session.close()
        if code != Fenced.code and not session.fenced:
            # Entries written after the last durability point (a ``denied`` entry, a
            # drained signal) reach the forge before the claim says the run stopped.
            session.flush(status)
        requeued = code == Suspended.code and str(waiting_for or "").startswith(REQUEUE)
        if requeued:
            status = "requeued"  # the objective's next run: back in the queue, claim released
            message = message or "the judge was not satisfied; queued for another run"
        if code == Suspended.code and waiting_for == WAITING_FOR_OBJECTIVE:
            code, status = Paused.code, "paused"  # max_runs used up: paused, not failed
            message = message or "the objective's max_runs are used up; raise it to resume"
        if code == Fenced.code or session.fenced:
            return RunReport(brief.id, why.value, "fenced", Fenced.code, message=message)
        if code == 0 and isinstance(output, dict) and output.get("status") == "failed":
            code, status = Failed.code, "failed"  # the desk gave up: finished and failed
        report = RunReport(brief.id, why.value, status, code, steps=steps, waiting_for=waiting_for)
        redact = Redactor(session.secrets()).text
        report.message = redact(message or _output_message(output))
        report.head_sha = session.head()
        report.review = self._review(brief, session, report, output, redact=redact)
        if requeued:
            self.store.release(session.claim, note="objective: queued for another run")
        else:
            self._settle_claim(session.claim, report)
        return report

    def _close_cancelled(self, brief: Brief, claim: Claim) -> RunReport:
        report = RunReport(brief.id, Why.CANCEL.value, "cancelled", 0, message="cancelled")
        previous = read_review(self.forge, brief.id)
        if previous is not None and previous.state != "merged":
            write_review(
                self.forge,
                brief.id,
                head_sha=previous.head_sha,
                title=f"[closed] {brief.id}: {brief.title}",
                body=previous.body + "\n\nCancelled before the run finished.\n",
                state="closed",
            )
            report.review = "closed"
        self.store.release(claim, done=True)
        return report

    def _review(
        self,
        brief: Brief,
        session: Any,
        report: RunReport,
        output: Any,
        *,
        redact: Callable[[str], str],
    ) -> str:
        outcome = output if isinstance(output, dict) else {}
        if report.code == 0 and outcome.get("status", "done") == "done":
            state = "ready"
        elif report.code in {0, 1, 77}:
            state = "closed"
        else:
            state = "draft"
        previous = read_review(self.forge, brief.id)
        if previous is not None and previous.state == "merged":
            return "merged"
        if not report.head_sha and previous is None:
            # Nothing was ever pushed (the first checkpoint was refused): no branch to review.
            return "none"
        label = {"ready": "", "draft": "[draft] ", "closed": "[closed] "}[state]
        body = render_body(
            outcome=report.status if report.code else str(outcome.get("status", "done")),
            summary_text=str(outcome.get("summary", "")) or report.message,
            journal=session.summary(),
            claimed=list(outcome.get("evidence", []) or []),
        )
        write_review(
            self.forge,
            brief.id,
            head_sha=report.head_sha,
            title=f"{label}{brief.id}: {brief.title}",
            body=redact(with_table(body, evidence_table(self.forge, brief))),
            state=state,
        )
        return state

    def _settle_claim(self, claim: Claim, report: RunReport) -> None:
        after = _CLAIM_AFTER.get(report.code, "stuck")
        if after == "done":
            self.store.release(claim, done=True)
        elif after == "release":
            self.store.release(claim)
        elif after == "waiting":
            waiting = report.waiting_for or ("budget" if report.code == 7 else "event")
            self.store.set_waiting(claim, waiting)
        else:
            self.given_up.add(claim.brief)
            self.store.release(claim, note=f"{report.status}: {report.message}"[:300])


def evidence_table(forge: Forge, brief: Brief) -> str:
    """The gate's claimed-versus-verified table for the review body.

    The gate reads a brief's rows from ``briefs/`` on main, or from the forge's other briefs
    (GitHub issues); a brief it cannot find there yet gets a note instead of a failed run.
    """
    try:
        return review_table(forge, brief.id)
    except BadInput:
        if brief.source.startswith("briefs/"):
            raise
        return (
            f"Evidence: not gated yet: the gate could not read this brief's verify rows "
            f"from {brief.source}.\n"
        )


def _output_message(output: Any) -> str:
    if isinstance(output, dict):
        error = output.get("error")
        if not output.get("summary") and isinstance(error, dict):  # a failed run's end
            return f"{error.get('type', 'Error')}: {error.get('message', '')}"[:300]
        return str(output.get("summary", ""))[:200]
    return ""


def exit_code(reports: list[RunReport], *, nothing: int = Busy.code) -> int:
    """The process exit code: the last run's, or ``nothing`` when no brief was taken."""
    if not reports:
        return nothing
    for report in reports:
        if report.code == Fenced.code:
            return Fenced.code
    return reports[-1].code


def run_slots(
    make_loop: Callable[[int], DeskLoop],
    *,
    concurrency: int,
    once: bool = False,
    only: str | None = None,
) -> list[RunReport]:
    """Run a desk with ``concurrency`` loops side by side (threads, one holder each).

    Each slot is an independent ``DeskLoop`` with its own forge handle and holder token, so
    slots race for briefs through the same claim CAS as separate processes would. With
    ``once`` or ``only`` there is one slot.
    """
    if concurrency <= 1 or once or only is not None:
        return make_loop(0).run(once=once, only=only)
    reports: list[RunReport] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def slot(index: int) -> None:
        try:
            found = make_loop(index).run()
        except BaseException as error:  # re-raised in the caller's thread below
            with lock:
                failures.append(error)
            return
        with lock:
            reports.extend(found)

    threads = [
        threading.Thread(target=slot, args=(i,), name=f"desk-slot-{i}") for i in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return reports
