"""A snapshot of everything the forge shows, read in one fetch: the input of board and sweep.

``ForgeSnapshot`` is plain data: the briefs on main, every claim record, what each branch
journal says (reduced to ``JournalInfo``), evidence records, reviews, events and status
records. ``assay.board.source`` fills it from a forge; the board's rows and the sweepers'
plans are pure functions of it, which is what makes both deterministic and testable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from assay.board.model import Session, parse_time
from assay.board.sessions import entry_time, sessions
from assay.journal.summary import agent_step

LIVE_CLAIM_STATES = frozenset({"held"})


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

    def expires_at(self, skew_s: float) -> datetime | None:
        if self.renewed_at is None:
            return None
        return self.renewed_at + timedelta(seconds=self.lease_s + skew_s)

    def expired(self, now: datetime, skew_s: float) -> bool:
        """A held claim whose lease (plus skew) ran out; other states hold no lease clock."""
        expiry = self.expires_at(skew_s)
        return self.state == "held" and expiry is not None and now > expiry

    def live(self, now: datetime, skew_s: float) -> bool:
        return self.state in LIVE_CLAIM_STATES and not self.expired(now, skew_s)


@dataclass(frozen=True)
class JournalInfo:
    """A branch journal reduced to what the board and the sweepers need."""

    entries: int = 0
    steps: int = 0
    model_calls: int = 0
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
    round_trips: int = 0

    def branch(self, brief: str) -> str:
        """The sha of ``assay/<brief>``, or "" when there is no such branch."""
        return self.refs.get(f"refs/heads/assay/{brief}", "")

    def branches(self) -> list[str]:
        prefix = "refs/heads/assay/"
        return sorted(ref[len(prefix) :] for ref in self.refs if ref.startswith(prefix))

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


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def journal_info(
    entries: Sequence[Mapping[str, Any]], *, head: str = "", problem: str = ""
) -> JournalInfo:
    """Reduce journal entries (oldest first) to a ``JournalInfo``."""
    steps = model_calls = tokens_in = tokens_out = 0
    usd = 0.0
    last_step = ""
    last_step_at: datetime | None = None
    consumed: set[str] = set()
    claimed: dict[str, str] = {}
    waiting_for = ""
    wait_until: datetime | None = None
    fence = 0
    unsandboxed = False
    times = [moment for moment in (entry_time(e) for e in entries) if moment is not None]
    for entry in entries:
        kind = str(entry.get("kind", ""))
        fence = max(fence, _int(entry.get("fence")))
        usage = entry.get("usage")
        if isinstance(usage, Mapping):
            tokens_in += _int(usage.get("in_tokens"))
            tokens_out += _int(usage.get("out_tokens"))
            usd += _num(usage.get("usd"))
        if kind == "step":
            # An intent line (status "started") and its result line are one step.
            if entry.get("status") != "started":
                steps += 1
                if entry.get("step") == "model":
                    model_calls += 1
            last_step = agent_step(entry) or str(entry.get("name") or entry.get("step") or "step")
            last_step_at = entry_time(entry)
            if entry.get("name") == "evidence.claimed":
                claimed = _claimed_rows(entry.get("out"))
        consumed.update(_event_ids(entry))
        if kind == "wait":
            waiting_for = str(entry.get("for") or entry.get("waiting_for") or "")
            wait_until = parse_time(entry.get("until"))
        elif kind in {"wake", "end", "takeover", "start"}:
            waiting_for = ""
            wait_until = None
        if kind == "start" and isinstance(entry.get("sandbox"), Mapping):
            unsandboxed = entry["sandbox"].get("sandboxed") is False
    last = entries[-1] if entries else {}
    return JournalInfo(
        entries=len(entries),
        steps=steps,
        model_calls=model_calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        usd=round(usd, 6),
        last_step=last_step,
        last_step_at=last_step_at,
        last_kind=str(last.get("kind", "")),
        last_at=max(times) if times else None,
        first_at=min(times) if times else None,
        fence=fence,
        head=head,
        waiting_for=waiting_for,
        wait_until=wait_until,
        consumed_events=frozenset(consumed),
        sessions=sessions(entries),
        claimed=claimed,
        problem=problem,
        unsandboxed=unsandboxed,
    )


def _claimed_rows(output: Any) -> dict[str, str]:
    if not isinstance(output, Mapping) or not isinstance(output.get("rows"), list):
        return {}
    found: dict[str, str] = {}
    for row in output["rows"]:
        if isinstance(row, Mapping) and isinstance(row.get("row"), str):
            found[row["row"]] = str(row.get("result", ""))
    return found


def _event_ids(entry: Mapping[str, Any]) -> set[str]:
    """Ids of the events an entry consumed: a wake's ``event``, a signal drain's ``events``."""
    found: set[str] = set()
    candidates: list[Any] = []
    if entry.get("kind") == "wake":
        candidates.append(entry.get("event"))
    if entry.get("kind") == "signal" and isinstance(entry.get("events"), list):
        candidates.extend(entry["events"])
    for event in candidates:
        if isinstance(event, Mapping) and isinstance(event.get("id"), str):
            found.add(event["id"])
        elif isinstance(event, str):
            found.add(event)
    return found
