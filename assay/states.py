"""The one vocabulary of brief states, and the rules every reader judges them by.

The board, ``assay status``, ``assay resync`` and the sweepers all say what a brief is
doing; they say it with ``State`` and decide it with ``classify``, so that one forge never
reads as ``done`` in one place and ``in review`` in another. The lease-expiry rule
(``lease_expired``) and the "has the awaited event arrived" rule (``arrival``) live here
too, for the same reason: claims, selection, the board and the sweepers share them.

Nothing here reads the forge; callers pass what they read (``Facts``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol


class State(StrEnum):
    """What is happening to one brief, in board order: what needs a human first."""

    INVALID = "invalid"  # a record of this brief failed validation (the reason is shown)
    STUCK = "stuck"  # a sweeper found the lease expired and released it for resume
    EXPIRED = "expired"  # held, lease plus skew run out, not yet swept
    REFUSED = "refused"  # finished, but the gate's evidence at the review's head fails
    PAUSED = "paused"  # the journal ends on a budget entry, or the claim waits on budget
    WAITING = "waiting"  # suspended for an event or a timer; no process held
    HELD = "held"  # a live claim: a process is working on it
    RELEASED = "released"  # released by its holder; resumable
    QUEUED = "queued"  # on main, never claimed
    CANCELLED = "cancelled"  # cancelled before anybody finished it
    IN_REVIEW = "in review"  # finished, its review is open and nothing refused it yet
    CLOSED = "closed"  # finished without an open review (failed, or closed)
    MERGED = "merged"  # its work reached main (the branch journal, or the review merged)
    ORPHAN = "orphan"  # a claim whose brief is not on main

    @property
    def heading(self) -> str:
        """The board's heading for this state's group."""
        return TITLES[self]

    @property
    def finished(self) -> bool:
        """Whether the run has ended (its age stops at its last entry)."""
        return self in FINISHED


ORDER: tuple[State, ...] = tuple(State)

# What status records written by desks or people say while a brief is being worked on; the
# honest-status sweeper corrects them once the claim is not live.
WORKING_WORDS = frozenset({"working", "held", "running"})
# The words of a status record that claim a condition of the brief (not an event, such as
# ``woken``): a record claiming a condition the brief has left is stale.
CONDITION_WORDS = frozenset({state.value for state in State}) | WORKING_WORDS

TITLES: dict[State, str] = {
    State.INVALID: "Invalid (a record failed validation)",
    State.STUCK: "Stuck (released for resume)",
    State.EXPIRED: "Lease expired (not yet swept)",
    State.REFUSED: "Refused by the gate",
    State.PAUSED: "Paused on budget",
    State.WAITING: "Waiting (no process held)",
    State.HELD: "Working (claim live)",
    State.RELEASED: "Released (resumable)",
    State.QUEUED: "Queued (no claim yet)",
    State.CANCELLED: "Cancelled",
    State.IN_REVIEW: "In review",
    State.CLOSED: "Closed",
    State.MERGED: "Merged",
    State.ORPHAN: "Claims without a brief",
}

# The board's chart colour of each state (board.html).
COLOURS: dict[State, str] = {
    State.INVALID: "#e377c2",
    State.STUCK: "#d62728",
    State.EXPIRED: "#ff7f0e",
    State.REFUSED: "#a50f15",
    State.PAUSED: "#bcbd22",
    State.WAITING: "#17becf",
    State.HELD: "#2ca02c",
    State.RELEASED: "#9467bd",
    State.QUEUED: "#7f7f7f",
    State.CANCELLED: "#c7c7c7",
    State.IN_REVIEW: "#aec7e8",
    State.CLOSED: "#98df8a",
    State.MERGED: "#1f77b4",
    State.ORPHAN: "#8c564b",
}

FINISHED = frozenset({State.REFUSED, State.IN_REVIEW, State.CLOSED, State.MERGED})

# States of a claimed run a desk may resume (``assay resync --desk``): no live lease.
RESUMABLE = frozenset({State.RELEASED, State.STUCK, State.EXPIRED, State.WAITING, State.PAUSED})


@dataclass(frozen=True)
class ClaimRule:
    """How one claim state is judged: by the claims store, desk selection, ``classify`` and
    the board. A new claim state is one row of ``CLAIM_STATES`` (docs/internals.md)."""

    shows: State  # the brief's state when nothing else decides (merged, refused, paused, …)
    take: str = ""  # how a desk takes it: resume | takeover | wake | "" (never)
    lease: bool = False  # a lease clock runs: live until it expires, then taken over
    holds: bool = False  # its holder still holds it (may renew, wait or release it)
    finished: bool = False  # the run ended: the review and the gate say the rest
    pausable: bool = True  # a budget pause shows over it


CLAIM_STATES: dict[str, ClaimRule] = {
    "held": ClaimRule(State.HELD, take="takeover", lease=True, holds=True),
    "waiting": ClaimRule(State.WAITING, take="wake", holds=True),
    "released": ClaimRule(State.RELEASED, take="resume"),
    "done": ClaimRule(State.CLOSED, finished=True),
    # a sweeper judged the holder dead: any desk resumes the run
    "stuck": ClaimRule(State.STUCK, take="takeover", pausable=False),
}


def claim_takeable(state: str, *, expired: bool, wake: bool) -> bool:
    """Whether a claim in ``state`` may be taken now: freely (released, stuck), once its
    lease ``expired`` (held), or by a waker when ``wake`` (waiting)."""
    rule = CLAIM_STATES.get(state)
    if rule is None or rule.finished:
        return False
    if rule.lease:
        return expired
    return wake if rule.take == "wake" else bool(rule.take)


@dataclass(frozen=True)
class Facts:
    """What the forge says about one brief, as ``classify`` needs it."""

    on_main: bool = True  # the brief is on main (or is one of the forge's issue briefs)
    invalid: str = ""  # why a record of this brief failed validation
    claim: str | None = None  # the claim record's state, None without a claim
    lease_expired: bool = False  # a held claim whose lease ran out (``lease_expired``)
    paused: bool = False  # the journal ends on ``budget`` or the claim waits on it
    merged: bool = False  # the branch's journal reached main, or the review says merged
    review: str = ""  # the review record's state: draft | ready | merged | closed
    refused: bool = False  # the gate ran a row at the review's head and it failed
    cancelled: bool = False  # a cancel event is on the brief's events ref


def classify(facts: Facts) -> State:
    """The one state of a brief (docs/board.md lists them, in board order)."""
    if facts.invalid:
        return State.INVALID
    if not facts.on_main:
        return State.ORPHAN
    if facts.merged or facts.review == "merged":
        return State.MERGED
    claim = facts.claim
    if claim is None or (claim == "released" and facts.cancelled):
        return State.CANCELLED if facts.cancelled else State.QUEUED
    rule = CLAIM_STATES.get(claim)
    if rule is None:  # the strict claim decoder refuses such a record before this
        return State.INVALID
    if rule.finished:
        if facts.refused:
            return State.REFUSED
        return State.IN_REVIEW if facts.review in {"ready", "draft"} else rule.shows
    if rule.lease and facts.lease_expired:
        return State.EXPIRED
    return State.PAUSED if facts.paused and rule.pausable else rule.shows


def lease_expired(
    renewed_at: datetime | None, lease_s: float, *, now: datetime, skew_s: float
) -> bool:
    """DESIGN §5: a lease is expired when ``now > renewed_at + lease_s + skew``.

    Only a held claim has a lease clock (callers check the state). A renewal time that
    is absent cannot start the clock; the strict claim decoder refuses such a record, so
    it is never judged here by the desks (the board shows it ``invalid``).
    """
    if renewed_at is None:
        return False
    return now > renewed_at + timedelta(seconds=lease_s + skew_s)


class EventLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    def satisfies(self, waiting_for: str) -> bool: ...


def arrival(
    waiting_for: str,
    events: Iterable[EventLike],
    *,
    consumed: Iterable[str],
    wait_until: datetime | None,
    now: datetime | None = None,
) -> str | None:
    """What ends a wait, or None: the id of the first event not yet consumed that satisfies
    ``waiting_for`` (or cancels the run), else ``timer:<time>`` once a timer wait is due.

    A ``timer:<iso>`` or ``until:<iso>`` ``waiting_for`` carries its own time when the
    journal does not. The budget wait is judged by the caller (it needs the brief).
    """
    seen = set(consumed)
    for event in events:
        if event.id in seen:
            continue
        if event.kind == "cancel" or (waiting_for and event.satisfies(waiting_for)):
            return event.id
    until = wait_until
    if until is None and waiting_for.startswith(("timer:", "until:")):
        until = _parse(waiting_for.split(":", 1)[1])
    if until is not None and (now or datetime.now(UTC)) >= until:
        return "timer:" + until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return None


def _parse(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
