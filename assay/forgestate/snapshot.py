"""A snapshot of everything the forge shows, read in one fetch: the input of board and sweep.

``ForgeSnapshot`` is plain data: the briefs on main, every claim record, what each branch
journal says (reduced to ``JournalInfo``), evidence records, reviews, events and status
records. ``assay.forgestate.source`` fills it from a forge; the board's rows and the sweepers'
plans are pure functions of it, which is what makes both deterministic and testable.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import assay.refs as refs
from assay.errors import AssayError
from assay.forgestate.times import parse_time
from assay.journal.fold import Session
from assay.states import CLAIM_STATES, lease_expired

# Claim states whose holder is live while its lease runs (``held``).
LIVE_CLAIM_STATES = frozenset(state for state, rule in CLAIM_STATES.items() if rule.lease)


@dataclass(frozen=True)
class BriefInfo:
    """What main says about a brief (``briefs/<id>.md``)."""

    id: str
    title: str = ""
    desk: str = ""
    rows: tuple[str, ...] = ()  # acceptance row ids
    commands: tuple[str, ...] = ()  # each row's command, as the brief on main writes it
    problem: str = ""  # set when the brief file does not parse


@dataclass(frozen=True)
class ClaimInfo:
    """One claim record (``refs/assay/claims/<brief>``) and the commit it was read from."""

    brief: str
    desk: str = ""
    holder: str = ""
    fence: int = 0
    state: str = ""
    since: datetime | None = None
    renewed_at: datetime | None = None
    lease_s: float = 0.0
    waiting_for: str = ""
    attempt: int = 0
    sha: str = ""
    record: Any = None  # the claims module's own record, passed back to ``mark_stuck``
    problem: str = ""  # why the claims decoder refused the record (state ``invalid``)
    workflow_run: int = 0  # the holder's GitHub Actions run, 0: not in one

    def expired(self, now: datetime, skew_s: float) -> bool:
        """A held claim whose lease (plus skew) ran out; other states hold no lease clock."""
        return self.state in LIVE_CLAIM_STATES and lease_expired(
            self.renewed_at, self.lease_s, now=now, skew_s=skew_s
        )

    @classmethod
    def from_record(cls, record: Any) -> ClaimInfo:
        """The board's view of a ``ClaimRecord`` the claims module's decoder accepted."""
        return cls(
            brief=record.brief,
            desk=record.desk,
            holder=record.holder,
            fence=record.fence,
            state=record.state,
            since=parse_time(record.since),
            renewed_at=parse_time(record.renewed_at),
            lease_s=float(record.lease_s),
            waiting_for=record.waiting_for or "",
            attempt=record.attempt,
            sha=record.sha,
            record=record,
            workflow_run=record.workflow_run,
        )

    def live(self, now: datetime, skew_s: float) -> bool:
        return self.state in LIVE_CLAIM_STATES and not self.expired(now, skew_s)


@dataclass(frozen=True)
class JournalInfo:
    """A branch journal reduced to what the board and the sweepers need."""

    entries: int = 0
    steps: int = 0
    model_calls: int = 0
    repeated_requests: int = 0  # model requests sent upstream again after an interruption
    repaid_model_calls: int = 0  # calls a lost machine took with it, paid again on resume
    tokens_in: int = 0
    tokens_out: int = 0
    usd: float = 0.0
    last_step: str = ""
    last_step_at: datetime | None = None
    last_kind: str = ""
    last_at: datetime | None = None
    first_at: datetime | None = None
    fence: int = 0
    head: str = ""
    waiting_for: str = ""
    wait_until: datetime | None = None
    consumed_events: frozenset[str] = frozenset()
    sessions: tuple[Session, ...] = ()
    claimed: Mapping[str, str] = field(default_factory=dict)  # row -> "pass" | "fail"
    problem: str = ""  # set when the journal failed its integrity check
    unsandboxed: bool = False  # a start entry records network host or isolation off


@dataclass(frozen=True)
class EventInfo:
    """One event on ``refs/assay/events/<brief>``."""

    id: str
    kind: str
    at: datetime | None = None
    actor: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    record: Any = None  # the runtime ``Event`` the events decoder returned

    def satisfies(self, waiting_for: str) -> bool:
        """Whether this event ends a wait for ``waiting_for``: the rule of the runtime's
        ``Event.satisfies``, restated here so the waker need not import the runtime (its
        start-up time is wake latency); a test pins the two to agree."""
        if self.kind in {"approve", "reject"}:
            return str(self.data.get("name") or "approval") == waiting_for
        return self.kind == waiting_for or self.data.get("name") == waiting_for


@dataclass(frozen=True)
class EvidenceInfo:
    """One evidence record of one row, oldest first on the brief's evidence ref."""

    row: str
    passed: bool
    head_sha: str
    at: str = ""
    record: Any = None  # the evidence package's checked ``EvidenceRecord`` (it judges it)


@dataclass(frozen=True)
class ForgeSnapshot:
    """Everything one sweep or one board reads, from one fetch."""

    url: str
    main: str = ""
    refs: Mapping[str, str] = field(default_factory=dict)
    briefs: Mapping[str, BriefInfo] = field(default_factory=dict)
    claims: Mapping[str, ClaimInfo] = field(default_factory=dict)
    journals: Mapping[str, JournalInfo] = field(default_factory=dict)
    evidence: Mapping[str, Sequence[EvidenceInfo]] = field(default_factory=dict)
    reviews: Mapping[str, str] = field(default_factory=dict)  # brief -> review ref's sha
    review_states: Mapping[str, str] = field(default_factory=dict)  # draft/ready/merged/closed
    review_heads: Mapping[str, str] = field(default_factory=dict)  # the review record's head_sha
    events: Mapping[str, Sequence[EventInfo]] = field(default_factory=dict)
    statuses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    templates: Mapping[str, str] = field(default_factory=dict)  # board_templates/ on main
    merged: frozenset[str] = frozenset()  # briefs whose branch journal reached main
    invalid: Mapping[str, AssayError] = field(default_factory=dict)  # brief -> its decoder's error
    # brief -> one note per event record skipped (malformed, oversized): never delivered
    event_notes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    round_trips: int = 0
    # brief -> its holdout rows as (id, "holdout <digest>"): judged like its other rows
    holdout: Mapping[str, Sequence[tuple[str, str]]] = field(default_factory=dict)
    # The fingerprint of the gate key that checked the evidence signatures ("" none: each
    # signature was seen, not checked).
    evidence_key: str = ""

    def branch(self, brief: str) -> str:
        """The sha of ``assay/<brief>``, or "" when there is no such branch."""
        return self.refs.get(refs.BRANCHES + brief, "")

    def checkpoint(self, brief: str) -> str:
        """The commit whose journal speaks for the brief's run (``checkpoint_tips``); ""
        when it has none."""
        return self._checkpoints.get(brief, "")

    def run(self, brief: str) -> str:
        """The tip of the brief's newest run ref (a merged run, kept), or ""."""
        return self._runs.get(brief, ("", 0))[0]

    @functools.cached_property
    def _checkpoints(self) -> dict[str, str]:
        return checkpoint_tips(self.refs)

    @functools.cached_property
    def _runs(self) -> dict[str, tuple[str, int]]:
        return newest_runs(self.refs)

    def invalid_reason(self, brief: str) -> str:
        """Why a record of ``brief`` failed its owner's decoder ("" when all are sound):
        its file on main, its claim, events, evidence or review record, or its journal."""
        info = self.briefs.get(brief)
        if info is not None and info.problem:
            return info.problem
        if brief in self.invalid:
            return self.invalid[brief].message
        journal = self.journals.get(brief)
        return f"journal: {journal.problem}" if journal is not None and journal.problem else ""

    def is_merged(self, brief: str) -> bool:
        """Whether the brief's work reached main: its branch journal, or a merged review."""
        return brief in self.merged or self.review_states.get(brief) == "merged"

    def cancelled(self, brief: str) -> bool:
        """Whether a cancel event is on the brief's events ref."""
        return any(event.kind == "cancel" for event in self.events.get(brief, ()))

    def branches(self) -> list[str]:
        found = (refs.brief_of(ref, refs.BRANCHES) for ref in self.refs)
        return sorted(brief for brief in found if brief)

    def latest_instant(self) -> datetime | None:
        """The latest time the forge itself records: claim renewals and journal entries."""
        moments: list[datetime] = []
        for claim in self.claims.values():
            moments += [m for m in (claim.renewed_at, claim.since) if m is not None]
        for journal in self.journals.values():
            if journal.last_at is not None:
                moments.append(journal.last_at)
        for events in self.events.values():
            moments += [event.at for event in events if event.at is not None]
        return max(moments) if moments else None


def newest_runs(found: Mapping[str, str]) -> dict[str, tuple[str, int]]:
    """brief -> ``(tip, attempt)`` of its newest run ref (``refs/assay/runs/<brief>/<n>``)
    among ``found`` (a fetch's refs)."""
    runs: dict[str, tuple[str, int]] = {}
    for ref, sha in found.items():
        named = refs.run_of(ref)
        if named is not None and named[1] >= runs.get(named[0], ("", -1))[1]:
            runs[named[0]] = (sha, named[1])
    return runs


def checkpoint_tips(found: Mapping[str, str]) -> dict[str, str]:
    """brief -> the commit whose journal speaks for its run, among ``found``: its journal
    ref's tip; else, once the run merged and that ref is gone, its newest run ref's (the
    merge kept the checkpoints there); else, for a run written before the journal ref,
    its branch's (the journal rode on it)."""
    runs = newest_runs(found)
    briefs = set(runs)
    for ref in found:
        briefs |= {
            brief for p in (refs.JOURNALS, refs.BRANCHES) if (brief := refs.brief_of(ref, p))
        }
    tips = {
        brief: found.get(refs.JOURNALS + brief)
        or runs.get(brief, ("", 0))[0]
        or found.get(refs.BRANCHES + brief, "")
        for brief in briefs
    }
    return {brief: tip for brief, tip in tips.items() if tip}


def journal_info(
    entries: Sequence[Mapping[str, Any]], *, head: str = "", problem: str = ""
) -> JournalInfo:
    """Reduce journal entries (oldest first) to a ``JournalInfo``: a view of their fold."""
    from assay.journal.fold import fold

    try:
        facts = fold(entries)
    except AssayError as error:  # an unknown kind: the journal is not one this Assay reads
        return JournalInfo(problem=problem or f"corrupt: {error.message}", head=head)
    return JournalInfo(
        entries=facts.entries,
        steps=facts.totals.steps,
        model_calls=facts.totals.model_calls,
        repeated_requests=facts.repeated_requests,
        repaid_model_calls=facts.repaid_model_calls,
        tokens_in=facts.totals.tokens_in,
        tokens_out=facts.totals.tokens_out,
        usd=facts.totals.usd,
        last_step=facts.last_step,
        last_step_at=parse_time(facts.last_step_time),
        last_kind=facts.last_kind,
        last_at=facts.last_at,
        first_at=facts.first_at,
        fence=facts.fence,
        head=head,
        waiting_for=facts.waiting_for or "",
        wait_until=parse_time(facts.wait_until),
        consumed_events=frozenset(facts.consumed),
        sessions=facts.sessions,
        claimed=_claimed_rows(facts.claim_step),
        problem=problem,
        unsandboxed=facts.unsandboxed,
    )


def _claimed_rows(step: Mapping[str, Any] | None) -> dict[str, str]:
    """Row -> result of the latest ``evidence.claimed`` step (inline output only: the board
    reads no blob; a claim is only ever displayed)."""
    out = step.get("out") if step is not None else None
    output = out.get("value") if isinstance(out, Mapping) else None
    if not isinstance(output, Mapping) or not isinstance(output.get("rows"), list):
        return {}
    found: dict[str, str] = {}
    for row in output["rows"]:
        if isinstance(row, Mapping) and isinstance(row.get("row"), str):
            found[row["row"]] = str(row.get("result", ""))
    return found
