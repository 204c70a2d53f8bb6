"""``assay desk run``: take briefs from the forge and run them, one durable run at a time.

One iteration: read the forge (briefs on main, claims, merged branches, cancellations) in
a few round trips, choose the highest-priority brief this desk ``takes`` whose dependencies
are merged (``assay.desks.manifests.selection``), claim it by CAS push, check out ``assay/<brief>``,
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

from assay.branch import MAIN_REF, branch_ref
from assay.briefs import Brief
from assay.claims import Claim, ClaimRecord, ClaimStore
from assay.desks.host.holders import HolderLock
from assay.desks.host.objectives import REQUEUE
from assay.desks.host.objectives import WAITING_FOR as WAITING_FOR_OBJECTIVE
from assay.desks.host.session import Session, budget_for
from assay.desks.host.settle import Settle, review_state, settle_for
from assay.desks.manifests.selection import Candidate, Why, queue
from assay.desks.records.review import (
    Review,
    new_review,
    read_review,
    render_body,
    review_at,
    reviews_ref,
    stage_update,
    write_review,
)
from assay.desks.records.state import ForgeView, read_view
from assay.errors import AssayError, Busy, Failed, Fenced, Paused, Suspended
from assay.evidence.table import pending_table, table_in, with_table
from assay.forge import Forge
from assay.forge.records import Stage
from assay.journal import Redactor
from assay.plumbing import RefUpdate, no_space_error
from assay.refs import journal_ref
from assay.runtime import execute


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
        # Every desk on this host pushes through one group: its claims, checkpoints and
        # settlements go out with the others' in one push per round (assay.forge.group).
        self.forge.join_group()
        self.store = ClaimStore(self.forge, skew_s=self.skew_s)
        self.skew_s = self.store.skew_s
        # Briefs whose run this process could not continue (diverged, corrupt, a bug):
        # released for a human or another build, but not retaken by this process.
        self.given_up: set[str] = set()
        # The branch and main tips each claimed brief's claim push asserted (checkout uses).
        self._tips: dict[str, dict[str, str | None] | None] = {}
        self._seen_events: dict[str, list[Any]] = {}  # ... and its events, as the view read them
        self._previous: dict[str, ClaimRecord | None] = {}  # ... and the claim it took over
        # While run() holds the holder token's local lock, a claim held under the token
        # is a dead process's (assay.desks.host.holders): taken back at once.
        self._holder_locked = False
        # Why nothing was taken: who holds the briefs this desk would take (held_notes).
        self.busy_notes: list[str] = []
        self._last_view: ForgeView | None = None

    # ------------------------------------------------------------------ choosing

    def held_notes(self, view: ForgeView, *, only: str | None = None) -> list[str]:
        """For each brief this desk takes whose claim another live holder has (or seems
        to have: its lease runs), who holds it, until when, and how to take it back."""
        notes = []
        now = self.store.clock()
        for brief_id in sorted(view.briefs):
            claim = view.claims.get(brief_id)
            if claim is None or (only is not None and brief_id != only):
                continue
            if brief_id in view.merged or not self.desk.takes_brief(view.briefs[brief_id]):
                continue
            if claim.has_lease and not claim.expired(skew_s=self.store.skew_s, now=now):
                notes.append(self.store.held_note(claim))
        return notes

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
            reclaim=self.holder if self._holder_locked else "",
        )

    def claim_next(
        self, *, only: str | None = None, view: ForgeView | None = None
    ) -> tuple[Brief, Claim, Why] | None:
        """Claim the first candidate whose CAS push this holder wins, or None.

        Each claim is one push decided from the view (``acquire(seen=...)``) that also
        asserts the branch tip the view saw, so the checkout needs no fetch of its own. A
        candidate lost that way moved after the view was read; when every candidate was
        lost like that, the view is read once more (another desk may have released one).
        """
        if view is not None:
            view.budget_left = self.budget_left  # this desk's budgets judge a paused run
        for _ in range(3):
            view = view or self.view()
            if only is not None:
                view.require(only)
            raced = False
            for candidate in self.candidates(view, only=only):
                if candidate.brief in self.given_up:
                    continue
                try:
                    claim = self._acquire(view, candidate)
                except Busy as busy:
                    raced = raced or bool(busy.details.get("raced"))
                    continue  # another desk won this one; the next candidate
                self._tips[candidate.brief] = self._known_tips(view, candidate.brief)
                self._seen_events[candidate.brief] = view.events(candidate.brief)
                self._previous[candidate.brief] = view.claims.get(candidate.brief)
                for note in view.event_notes.get(candidate.brief, ()):
                    self.on_progress(f"{candidate.brief}: event {note}")  # never delivered
                return view.briefs[candidate.brief], claim, candidate.why
            if not raced:
                self._last_view = view
                return None
            view = None
        self._last_view = view
        return None

    def _acquire(self, view: ForgeView, candidate: Candidate) -> Claim:
        # The claim asserts the tips the checkout then starts from: branch and checkpoints.
        also = [
            RefUpdate(ref, tip, expected=tip)
            for ref, tip in (
                (branch_ref(candidate.brief), view.branches.get(candidate.brief)),
                (journal_ref(candidate.brief), view.journal_tips.get(candidate.brief)),
            )
            if tip
        ]
        return self.store.acquire(
            candidate.brief,
            self.desk.name,
            lease_s=float(self.desk.lease),
            holder=self.holder,
            allow_waiting=candidate.why in {Why.WAKE, Why.CANCEL},
            seen=view.claims.get(candidate.brief),
            also=also,
            reclaim=self._holder_locked,
        )

    @staticmethod
    def _known_tips(view: ForgeView, brief: str) -> dict[str, str | None] | None:
        if view.main is None:
            return None  # nothing to start from: the checkout's fetch says so
        return {
            branch_ref(brief): view.branches.get(brief),
            journal_ref(brief): view.journal_tips.get(brief),
            MAIN_REF: view.main,
        }

    # ------------------------------------------------------------------ running

    def run(self, *, once: bool = False, only: str | None = None) -> list[RunReport]:
        """Take and run briefs until none is claimable (or one, with ``once``/``only``).

        The loop holds its holder token's local lock while it runs: a claim still held
        under the token is then a dead process's, and is taken back at once. A ``cli``
        desk whose CLI is not installed is refused (``BadInput``) before it claims anything.
        """
        if self.desk.kind == "cli":
            from assay.desks.kinds.cli import check_installed

            check_installed(self.desk)
        with HolderLock.take(self.forge.state_dir, self.holder):
            self._holder_locked = True
            try:
                reports = self._run(once=once, only=only)
            finally:
                self._holder_locked = False
        if not reports and self._last_view is not None:
            self.busy_notes = self.held_notes(self._last_view, only=only)
        return reports

    def _run(self, *, once: bool, only: str | None) -> list[RunReport]:
        reports: list[RunReport] = []
        while True:
            taken = self.claim_next(only=only)
            if taken is None:
                break
            brief, claim, why = taken
            report = self.run_claimed(brief, claim, why)
            reports.append(report)
            if report.code == Fenced.code:
                break
            if once or only is not None:
                if not self._arrived_meanwhile(report):
                    break
                only = report.brief  # its event came while it ran: wake it now, once
        return reports

    def _arrived_meanwhile(self, report: RunReport) -> bool:
        """Whether a run that just suspended already has what it waits for: an event that
        landed while it ran, before its claim said ``waiting`` (so no waker woke it)."""
        if report.code != Suspended.code or report.status == "requeued":
            return False
        view = self.view()
        record = view.claims.get(report.brief)
        return record is not None and record.state == "waiting" and view.arrived(report.brief)

    def run_claimed(self, brief: Brief, claim: Claim, why: Why) -> RunReport:
        """Run one claimed brief to its next stop and leave claim and review consistent."""
        self.on_progress(f"{brief.id}: {why.value} (fence {claim.fence})")
        tips, seen_events = self._tips.pop(brief.id, None), self._seen_events.pop(brief.id, None)
        previous = self._previous.pop(brief.id, None)
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
                tips=tips,
                events=seen_events,
                previous=previous,
            )
        except (AssayError, OSError) as raised:
            # Could not even start (a bad model config, the forge went away, a full disk):
            # give the brief back at once rather than let it sit under a lease nobody renews.
            error = no_space(raised)
            self.given_up.add(brief.id)
            self.store.release(claim, note=f"{error.status}: {error.message}"[:300])
            return RunReport(brief.id, why.value, error.status, error.code, message=error.message)
        try:
            result = execute(session.entry, {"brief": brief.id}, **session.run_options())
            code, status = int(result.code), str(result.status)
            output, waiting_for = result.output, result.waiting_for
            steps = int(result.steps)
            message = ""
        except (AssayError, OSError) as raised:
            error = no_space(raised)
            code, status, output, waiting_for, steps = error.code, error.status, None, None, 0
            message = error.message
        finally:
            session.close()
        for note in getattr(session.hooks.log, "skipped", ()):
            self.on_progress(f"{brief.id}: event {note}")  # never delivered to the run
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
        self._finish(brief, session, report, output, redact=redact, requeued=requeued)
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

    def _finish(
        self,
        brief: Brief,
        session: Any,
        report: RunReport,
        output: Any,
        *,
        redact: Callable[[str], str],
        requeued: bool,
    ) -> None:
        """Write the review record and settle the claim in ONE atomic push of both refs.

        The review ref is read first (one round trip); if it moved since (the gate or a
        human wrote it), the atomic push is refused as a whole and the two are written one
        after the other. The desk writes only its own side: its summary and its claims. The
        evidence block is the gate's (``_gate_table``): the desk never judges its own rows.
        """
        claim = session.claim
        changes, message = self._claim_changes(claim, report, requeued=requeued)
        head = session.hooks.pushed_head
        if head is not None and head != claim.record.journal_head:
            changes["journal_head"] = head  # anchor the pushed journal head (DESIGN §6)
        ref = reviews_ref(brief.id)
        parent = self.forge.refresh([ref]).get(ref)
        previous = review_at(self.forge, brief.id, parent)
        beside = Stage(self.forge)
        kept = _kept_review(previous, report.head_sha)
        if kept is not None:
            report.review = kept
        else:
            state, title, body = self._review_record(brief, session, report, output)
            review = new_review(
                brief.id,
                head_sha=report.head_sha,
                title=title,
                body=redact(with_table(body, _gate_table(previous, report.head_sha))),
                state=state,
            )
            stage_update(beside, review, parent=parent)
            report.review = state
        if self.store.settle(claim, changes, message, beside=beside):
            return
        report.review = self._review(brief, session, report, output, redact=redact)
        self.store.settle(claim, changes, message)

    def _claim_changes(
        self, claim: Claim, report: RunReport, *, requeued: bool
    ) -> tuple[dict[str, Any], str]:
        """How the claim is left after a run: done, released, waiting (or given up)."""
        now = self.store.now()
        settle = settle_for(report.code, requeued=requeued)
        if settle is Settle.WAITING:
            waiting = report.waiting_for or ("budget" if report.code == Paused.code else "event")
            changes = self.store.waiting_changes(waiting, now=now)
            return changes, f"claim {claim.brief}: waiting for {waiting}"
        note = ""
        if settle is Settle.REQUEUE:
            note = "objective: queued for another run"
        elif settle is Settle.GIVE_UP:
            self.given_up.add(claim.brief)
            note = f"{report.status}: {report.message}"[:300]
        elif settle is Settle.RELEASE:  # the forge or the model was down: the note says which
            note = f"{report.status}: {report.message}"[:300]
        changes = self.store.release_changes(done=settle.finished, note=note, now=now)
        return changes, f"claim {claim.brief}: {changes['state']} by {claim.desk}"

    def _review_record(
        self, brief: Brief, session: Any, report: RunReport, output: Any
    ) -> tuple[str, str, str]:
        """(state, title, body without the evidence table) of the review after a run."""
        outcome = output if isinstance(output, dict) else {}
        state = review_state(report.code, str(outcome.get("status", "done")))
        label = {"ready": "", "draft": "[draft] ", "closed": "[closed] "}[state]
        body = render_body(
            outcome=report.status if report.code else str(outcome.get("status", "done")),
            summary_text=str(outcome.get("summary", "")) or report.message,
            journal=session.summary(),
            claimed=list(outcome.get("evidence", []) or []),
        )
        return state, f"{label}{brief.id}: {brief.title}", body

    def _review(
        self,
        brief: Brief,
        session: Any,
        report: RunReport,
        output: Any,
        *,
        redact: Callable[[str], str],
    ) -> str:
        previous = read_review(self.forge, brief.id)
        kept = _kept_review(previous, report.head_sha)
        if kept is not None:
            return kept
        state, title, body = self._review_record(brief, session, report, output)
        write_review(
            self.forge,
            brief.id,
            head_sha=report.head_sha,
            title=title,
            body=redact(with_table(body, _gate_table(previous, report.head_sha))),
            state=state,
        )
        return state


def _kept_review(previous: Review | None, head_sha: str) -> str | None:
    """``merged`` when the gate merged the review (a run never reopens it), ``none`` when
    nothing was ever pushed (the first checkpoint was refused: no branch to review), else
    None: the run writes its review."""
    if previous is not None and previous.state == "merged":
        return "merged"
    if not head_sha and previous is None:
        return "none"
    return None


def no_space(raised: AssayError | OSError) -> AssayError:
    """An ``OSError`` for want of disk space as ``NoSpace`` (69); other ``OSError``s re-raised."""
    if isinstance(raised, AssayError):
        return raised
    found = no_space_error(raised, str(raised.filename or "a local disk"))
    if found is not None:
        return found
    raise raised


def _gate_table(previous: Review | None, head_sha: str) -> str:
    """The review's evidence block after a run: the gate's own table when it already judged
    this head, else the note that it has not (the desk never computes the verdict)."""
    if previous is not None and previous.head_sha == head_sha:
        kept = table_in(previous.body)
        if kept:
            return kept
    return pending_table(head_sha)


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
