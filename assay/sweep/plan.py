"""What each sweeper kind would do, as a pure function of one ``ForgeSnapshot``.

Planning is separate from acting: ``--dry-run`` prints the plan and stops, and a sweep is
idempotent because every planner compares what it wants with what the forge already shows
(a claim already ``stuck``, a status record already saying so, a wake already dispatched for
that event) and plans nothing when they agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import assay.refs as refs
from assay.forgestate.briefs import state_of
from assay.forgestate.snapshot import ClaimInfo, EventInfo, ForgeSnapshot, JournalInfo
from assay.forgestate.times import duration, iso, parse_time
from assay.states import WORKING_WORDS, arrival
from assay.sweep.policy import (
    KINDS,
    BudgetsPolicy,
    HonestStatusPolicy,
    OrphansPolicy,
    StuckClaimsPolicy,
    SweepPolicy,
    WakerPolicy,
)

# Status records saying one of these claim a process is working on the brief right now.


@dataclass(frozen=True)
class Action:
    """One thing a sweep does (or, under ``--dry-run``, would do)."""

    sweeper: str  # the policy's name
    kind: str  # the policy's kind
    action: str  # mark-stuck | wake | report-orphan | delete-ref | report-budget | correct-status
    brief: str = ""
    ref: str = ""
    note: str = ""
    status: Mapping[str, Any] | None = None  # the status record to write for ``brief``
    detail: Mapping[str, Any] = field(default_factory=dict)
    claim: ClaimInfo | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "sweeper": self.sweeper,
            "kind": self.kind,
            "action": self.action,
            "brief": self.brief,
            "note": self.note,
        }
        if self.ref:
            data["ref"] = self.ref
        if self.status is not None:  # the state the brief's status record is set to
            data["state"] = str(self.status.get("state", ""))
        if self.detail:
            data["detail"] = dict(self.detail)
        return data


def _silent_since(claim: ClaimInfo, journal: JournalInfo | None) -> datetime | None:
    moments = [m for m in (claim.renewed_at, journal.last_at if journal else None) if m]
    return max(moments) if moments else None


def _status(state: str, note: str, *, claim: ClaimInfo | None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"state": state, "note": note}
    if claim is not None:
        record.update(desk=claim.desk, holder=claim.holder, fence=claim.fence)
    record.update(extra)
    return record


def _act(policy: SweepPolicy, action: str, brief: str, note: str, **rest: Any) -> Action:
    """One ``Action`` of ``policy``'s sweeper."""
    return Action(
        sweeper=policy.name, kind=policy.kind, action=action, brief=brief, note=note, **rest
    )


def lapsed_runs(snapshot: ForgeSnapshot, now: datetime) -> frozenset[int]:
    """The workflow runs of holders whose lease lapsed (at no skew: every policy's
    superset), whose status the forge is asked once per sweep (``Forge.running``)."""
    return frozenset(
        claim.workflow_run
        for claim in snapshot.claims.values()
        if claim.workflow_run and claim.expired(now, 0.0)
    )


def plan_stuck(
    snapshot: ForgeSnapshot,
    policy: StuckClaimsPolicy,
    now: datetime,
    *,
    running: frozenset[int] = frozenset(),
) -> list[Action]:
    """Mark stuck every held claim whose lease (plus skew) lapsed, unless its work reached
    main or its holder's workflow run is among ``running`` (the forge says it still runs:
    a holder alive by an external signal, whose renewals wait on the push budget)."""
    actions = []
    for brief, claim in sorted(snapshot.claims.items()):
        if not claim.expired(now, policy.skew_s) or snapshot.is_merged(brief):
            continue  # live, or its work already reached main: nothing to resume
        if claim.workflow_run and claim.workflow_run in running:
            continue  # its workflow run is still in progress: the holder is alive
        journal = snapshot.journals.get(brief)
        last = journal.last_step if journal and journal.last_step else "(no step recorded)"
        last_at = journal.last_step_at if journal else None
        silent_since = _silent_since(claim, journal)
        silent = (now - silent_since).total_seconds() if silent_since else None
        note = (
            f"stuck: desk {claim.desk} (holder {claim.holder}, fence {claim.fence}) "
            f"silent for {duration(silent)}; last step {last}"
            + (f" at {iso(last_at)}" if last_at else "")
            + f"; lease of {duration(claim.lease_s)} expired; released for resume"
        )
        actions.append(
            _act(
                policy,
                "mark-stuck",
                brief,
                note,
                ref=refs.CLAIMS + brief,
                claim=claim,
                status=_status(
                    "stuck",
                    note,
                    claim=claim,
                    last_step=last,
                    last_step_at=iso(last_at) if last_at else "",
                    silent_s=round(silent, 3) if silent is not None else None,
                ),
                detail={"fence": claim.fence, "last_step": last, "silent_s": silent},
            )
        )
    return actions


def arrived_event(
    claim: ClaimInfo, journal: JournalInfo | None, events: list[EventInfo], now: datetime
) -> str | None:
    """The id of the first event (or timer) that should wake this waiting run, else None:
    the one arrival rule (``assay.states.arrival``)."""
    waiting_for = (claim.waiting_for or (journal.waiting_for if journal else "")).strip()
    return arrival(
        waiting_for,
        events,
        consumed=journal.consumed_events if journal else (),
        wait_until=journal.wait_until if journal else None,
        now=now,
    )


def plan_wake(snapshot: ForgeSnapshot, policy: WakerPolicy, now: datetime) -> list[Action]:
    actions: list[Action] = []
    for brief, claim in sorted(snapshot.claims.items()):
        if claim.state != "waiting":
            continue
        journal = snapshot.journals.get(brief)
        event = arrived_event(claim, journal, list(snapshot.events.get(brief, ())), now)
        if event is None:
            continue
        status = snapshot.statuses.get(brief, {})
        woken_at = parse_time(status.get("at"))
        if (
            status.get("state") == "woken"
            and status.get("event") == event
            and status.get("fence") == claim.fence
            and woken_at is not None
            and now - woken_at < timedelta(seconds=policy.redispatch_after_s)
        ):
            continue  # already dispatched for this event; the run has not had time to start
        if len(actions) >= policy.max_dispatch:
            break
        note = f"woken: {event} arrived for a run waiting on {claim.waiting_for or 'an event'}"
        actions.append(
            _act(
                policy,
                "wake",
                brief,
                note,
                claim=claim,
                status=_status("woken", note, claim=claim, event=event),
                detail={"event": event, "dispatch": policy.dispatch},
            )
        )
    return actions


def find_orphans(snapshot: ForgeSnapshot) -> list[tuple[str, str, str]]:
    """``(what, ref, brief)`` for every orphan, sorted."""
    found: list[tuple[str, str, str]] = []
    for brief in snapshot.branches():
        if brief not in snapshot.briefs and brief not in snapshot.claims:
            found.append(("branch without brief or claim", refs.BRANCHES + brief, brief))
    for ref in snapshot.refs:
        brief = refs.brief_of(ref, refs.JOURNALS)
        if brief and brief not in snapshot.briefs and brief not in snapshot.claims:
            found.append(("journal without brief or claim", ref, brief))
    for brief in sorted(snapshot.claims):
        if brief not in snapshot.briefs:
            found.append(("claim without brief", refs.CLAIMS + brief, brief))
    for brief in sorted(snapshot.reviews):
        if not snapshot.branch(brief):
            found.append(("review whose branch is gone", refs.REVIEWS + brief, brief))
    return sorted(found, key=lambda item: item[1])


def plan_orphans(
    snapshot: ForgeSnapshot, policy: OrphansPolicy, *, fix: bool, reported: frozenset[str]
) -> list[Action]:
    """Report orphans not reported before (``reported``: refs the orphan log already names);
    with ``fix``, delete every orphan ref."""
    actions = []
    for what, ref, brief in find_orphans(snapshot):
        if fix or policy.fix:
            actions.append(
                _act(
                    policy,
                    "delete-ref",
                    brief,
                    f"deleted {ref}: {what}",
                    ref=ref,
                    detail={"what": what, "sha": snapshot.refs.get(ref, "")},
                )
            )
        elif ref not in reported:
            actions.append(
                _act(
                    policy,
                    "report-orphan",
                    brief,
                    f"orphan: {ref}: {what} (not deleted; `assay sweep --fix` deletes it)",
                    ref=ref,
                    detail={"what": what},
                )
            )
    return actions


def _spent(journal: JournalInfo) -> dict[str, Any]:
    return {
        "steps": journal.steps,
        "model_calls": journal.model_calls,
        "tokens": journal.tokens_in + journal.tokens_out,
        "usd": journal.usd,
    }


def plan_budgets(snapshot: ForgeSnapshot, policy: BudgetsPolicy, now: datetime) -> list[Action]:
    actions = []
    for brief, journal in sorted(snapshot.journals.items()):
        if journal.last_kind != "budget":
            continue
        claim = snapshot.claims.get(brief)
        if claim is not None and claim.live(now, 0.0) and claim.fence > journal.fence:
            continue  # a newer holder already resumed it
        spent = _spent(journal)
        status = snapshot.statuses.get(brief, {})
        if status.get("state") == "paused" and status.get("spent") == spent:
            continue
        note = (
            f"paused on budget after {spent['steps']} steps, {spent['model_calls']} model calls, "
            f"{spent['tokens']} tokens, ${spent['usd']:.4f}; raise the budget to resume"
        )
        actions.append(
            _act(
                policy,
                "report-budget",
                brief,
                note,
                claim=claim,
                status=_status("paused", note, claim=claim, spent=spent),
                detail={"spent": spent},
            )
        )
    return actions


def plan_honest_status(
    snapshot: ForgeSnapshot,
    policy: HonestStatusPolicy,
    now: datetime,
    *,
    already: frozenset[str] = frozenset(),
    running: frozenset[int] = frozenset(),
) -> list[Action]:
    """Status records saying "working" whose claim is not live; ``already``: briefs another
    action of this sweep writes a status for; ``running``: as for :func:`plan_stuck` (a
    held claim whose workflow run still runs is working, whatever its lease says)."""
    actions = []
    for brief, status in sorted(snapshot.statuses.items()):
        if brief in already or str(status.get("state", "")) not in WORKING_WORDS:
            continue
        claim = snapshot.claims.get(brief)
        if claim is not None and claim.live(now, policy.skew_s):
            continue
        if claim is not None and claim.state == "held" and claim.workflow_run in running:
            continue  # its holder is alive by its workflow run: the status is true
        # What the status now says is the brief's state in the one vocabulary: what the
        # board and ``assay status`` show for it.
        truth = state_of(snapshot, brief, now=now, skew_s=policy.skew_s).value
        if claim is None:
            why = "no claim exists"
        elif claim.state == "held":
            why = f"the lease of fence {claim.fence} ran out"
        else:
            why = f"the claim is {claim.state}"
        note = f"corrected: status said {status.get('state')!r} but {why}"
        actions.append(
            _act(
                policy,
                "correct-status",
                brief,
                note,
                claim=claim,
                status=_status(truth, note, claim=claim, was=str(status.get("state"))),
            )
        )
    return actions


def plan(
    snapshot: ForgeSnapshot,
    policies: Sequence[SweepPolicy],
    now: datetime,
    *,
    fix: bool = False,
    reported_orphans: frozenset[str] = frozenset(),
    running: frozenset[int] = frozenset(),
) -> list[Action]:
    """Every action of one sweep (disabled policies skipped). ``running``: the workflow
    runs (of :func:`lapsed_runs`) the forge says still run.

    Kinds run in a fixed order whatever the files are called: stuck claims first, so that
    honest-status, last, knows which status records this sweep already rewrites.
    """
    actions: list[Action] = []
    ordered = sorted(policies, key=lambda p: (KINDS.index(p.kind), p.name))
    for policy in ordered:
        if not policy.enabled:
            continue
        if isinstance(policy, StuckClaimsPolicy):
            actions += plan_stuck(snapshot, policy, now, running=running)
        elif isinstance(policy, WakerPolicy):
            actions += plan_wake(snapshot, policy, now)
        elif isinstance(policy, OrphansPolicy):
            actions += plan_orphans(snapshot, policy, fix=fix, reported=reported_orphans)
        elif isinstance(policy, BudgetsPolicy):
            actions += plan_budgets(snapshot, policy, now)
        elif isinstance(policy, HonestStatusPolicy):
            written = frozenset(a.brief for a in actions if a.status is not None)
            actions += plan_honest_status(snapshot, policy, now, already=written, running=running)
    return actions
