"""The ``assay sweep`` engine: one fetch, plan, act, record what was done on the forge.

A sweep reads every claim, branch, event, status and evidence ref in one fetch, plans with
``assay.sweep.plan`` and then acts. Every action is recorded on the forge, all of it in one
atomic push (``assay.sweep.apply``): claims through ``ClaimStore.mark_stuck_batch`` (a CAS
per claim, so a desk that renewed meanwhile wins and the sweep re-plans), the brief's honest
status as a record on ``refs/assay/status/<brief>``, and the whole sweep as one record on
``refs/assay/sweeps/log`` naming who swept, when, and each action with its outcome.
A sweep that finds nothing to do writes nothing, which is what makes it idempotent.

A holder whose lease lapsed may still be alive by a signal that costs no push: on GitHub
a desk in an Actions job names its workflow run in its claim, and the sweep asks the forge
once (``Forge.running``: one conditional REST call on GitHub, none elsewhere) which of the
lapsed holders' runs still run; those claims are not marked stuck.
"""

from __future__ import annotations

import getpass
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import assay.refs as refs
from assay.claims.record import CLAIMS_PREFIX
from assay.errors import Busy
from assay.forgestate.snapshot import ForgeSnapshot
from assay.forgestate.source import read_snapshot
from assay.forgestate.times import iso
from assay.ids import check_id
from assay.sweep.apply import apply_plan, planned_outcomes, reported_orphans
from assay.sweep.plan import Action, lapsed_runs, plan
from assay.sweep.policy import SweepPolicy, WakerPolicy

SWEEP_LOG = refs.SWEEP_LOG
_ATTEMPTS = 5  # plans per sweep when refs keep moving under it
ORPHAN_LOG = refs.ORPHAN_LOG

# (brief, desk, forge url, policy) -> pid of the woken desk process
Dispatcher = Callable[[str, str, str, WakerPolicy], int | None]


def default_actor() -> str:
    """``sweep.<user>.<host>``: who a sweep says it is, as a safe id."""
    raw = f"sweep.{getpass.getuser()}.{socket.gethostname()}"
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in raw)
    return cleaned.strip(".")[:100] or "sweep"


@dataclass
class SweepReport:
    """What one sweep saw and did."""

    sweep: str
    by: str
    at: datetime
    dry_run: bool
    claims: int = 0
    actions: list[Action] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    round_trips: int = 0
    seconds: float = 0.0
    recorded: str = ""  # the sweep log commit, "" when nothing was written

    def to_json(self) -> dict[str, Any]:
        actions = []
        for index, action in enumerate(self.actions):
            data = action.to_json()
            data["outcome"] = self.outcomes[index] if index < len(self.outcomes) else "planned"
            actions.append(data)
        return {
            "status": "ok",
            "code": 0,
            "sweep": self.sweep,
            "by": self.by,
            "at": iso(self.at),
            "dry_run": self.dry_run,
            "claims": self.claims,
            "actions": actions,
            "round_trips": self.round_trips,
            "seconds": round(self.seconds, 3),
            "recorded": self.recorded,
        }


def _identity(by: str) -> Any:
    from assay.plumbing import Identity

    return Identity(name=by, email=f"{by}@sweep.assay.invalid")


def take_snapshot(forge: Any, *, only_brief: str | None = None) -> ForgeSnapshot:
    """Everything a sweep reads, in one fetch (only one brief's refs with ``only_brief``)."""
    return read_snapshot(forge, only_brief=only_brief)


def run_sweep(
    forge: Any,
    policies: Sequence[SweepPolicy],
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    fix: bool = False,
    by: str | None = None,
    only_brief: str | None = None,
    dispatcher: Dispatcher | None = None,
) -> SweepReport:
    """Run one sweep over ``forge``; with ``dry_run`` nothing is written or dispatched."""
    started = time.monotonic()
    actor = check_id(by or default_actor(), what="sweeper name")
    if only_brief is not None:
        check_id(only_brief)
    sweep_id = uuid.uuid4().hex[:16]
    moment = now or datetime.now(UTC)
    dispatched: set[str] = set()
    trips = 0
    running: dict[int, bool] = {}  # workflow run -> still running, asked once per sweep
    for _attempt in range(_ATTEMPTS):
        snapshot = take_snapshot(forge, only_brief=only_brief)
        trips += snapshot.round_trips
        reported = reported_orphans(forge, snapshot.refs.get(ORPHAN_LOG))
        unasked = lapsed_runs(snapshot, moment) - set(running)
        if unasked:
            alive = forge.running(unasked)
            running.update({run: run in alive for run in unasked})
        actions = plan(
            snapshot,
            policies,
            moment,
            fix=fix,
            reported_orphans=reported,
            running=frozenset(run for run, alive in running.items() if alive),
        )
        if only_brief is not None:
            actions = [a for a in actions if a.brief == only_brief and a.kind != "orphans"]
        report = SweepReport(
            sweep=sweep_id,
            by=actor,
            at=moment,
            dry_run=dry_run,
            # Every claim ref read, a refused one included: it is shown invalid, not hidden.
            claims=sum(ref.startswith(CLAIMS_PREFIX) for ref in snapshot.refs),
            actions=actions,
            round_trips=trips,
        )
        if dry_run or not actions:
            break
        try:
            _apply(forge, snapshot, report, policies, reported, dispatcher, dispatched)
            break
        except Busy:
            # A claim, status or log moved since the snapshot (a desk renewed): nothing was
            # written; read again and plan again, which leaves the live claim alone.
            trips = report.round_trips + 1
            continue
    else:
        raise Busy(f"sweep {sweep_id}: the forge kept moving under {_ATTEMPTS} plans; try again")
    report.seconds = time.monotonic() - started
    return report


def _policy(policies: Sequence[SweepPolicy], name: str) -> SweepPolicy | None:
    return next((p for p in policies if p.name == name), None)


def _dispatch(
    forge: Any,
    actions: list[Action],
    policies: Sequence[SweepPolicy],
    dispatcher: Dispatcher | None,
    done: set[str],
) -> dict[int, str]:
    """Start the woken desks (each brief once per sweep, across re-plans)."""
    # Wakes are dispatched first, before anything is written: the woken desk's start-up is
    # most of the wake latency, so it overlaps with recording the wake. Two wakers racing
    # for one event at most start two desks, and the claim's CAS acquire lets one through.
    dispatched: dict[int, str] = {}
    for index, action in enumerate(actions):
        if action.action != "wake":
            continue
        policy = _policy(policies, action.sweeper)
        waker = policy if isinstance(policy, WakerPolicy) else WakerPolicy(kind="waker")
        desk = action.claim.desk if action.claim else ""
        if waker.dispatch == "local" and dispatcher is not None and desk:
            if action.brief in done:
                dispatched[index] = "dispatched"
                continue
            done.add(action.brief)
            pid = dispatcher(action.brief, desk, str(forge.url), waker)
            dispatched[index] = f"dispatched pid {pid}" if pid else "dispatched"
        else:
            dispatched[index] = "recorded (dispatch: none)"
    return dispatched


def _apply(
    forge: Any,
    snapshot: ForgeSnapshot,
    report: SweepReport,
    policies: Sequence[SweepPolicy],
    reported: frozenset[str],
    dispatcher: Dispatcher | None,
    dispatched_briefs: set[str],
) -> None:
    """Every write of the sweep in one atomic push (``Busy`` when a ref moved meanwhile)."""
    author = _identity(report.by)
    dispatched = _dispatch(forge, report.actions, policies, dispatcher, dispatched_briefs)
    outcomes = planned_outcomes(report.actions, dispatched)
    at = iso(report.at)
    report.outcomes = outcomes
    records: dict[str, dict[str, Any]] = {}
    new_orphans = [
        a.ref
        for a, outcome in zip(report.actions, outcomes, strict=True)
        if a.action == "report-orphan"
    ]
    if new_orphans:
        records[ORPHAN_LOG] = {
            "v": 1,
            "kind": "orphans",
            "refs": sorted(reported | set(new_orphans)),
            "by": report.by,
            "at": at,
            "sweep": report.sweep,
        }
    records[SWEEP_LOG] = {
        "v": 1,
        "kind": "sweep",
        "sweep": report.sweep,
        "by": report.by,
        "at": at,
        "actions": report.to_json()["actions"],
    }
    applied = apply_plan(
        forge,
        snapshot,
        report.actions,
        by=report.by,
        at=report.at,
        sweep=report.sweep,
        author=author,
        outcomes=outcomes,
        records=records,
    )
    report.recorded = applied.log_commit
    report.round_trips += applied.pushes
