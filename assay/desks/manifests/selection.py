"""Which brief a desk takes next: pure decisions over briefs, claims and merged briefs.

No I/O here, so the rules are easy to read and to test: a brief is a candidate for a desk
when the desk ``takes`` it, every brief it depends on is merged, nobody cancelled it, and
its claim is absent, released, held by an expired lease (a crashed holder), or waiting for
something that has arrived. Candidates are ordered by priority (highest first), then by id, or
by a per-holder order within a priority so that concurrent desks spread over the queue;
the claim's CAS push decides who actually gets one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from assay.claims.record import parse_time
from assay.states import CLAIM_STATES, lease_expired


class Why(StrEnum):
    """Why a brief is a candidate: what taking it means for its run."""

    NEW = "new"  # no claim yet: a first run
    RESUME = "resume"  # released: resume the journal on the branch
    TAKEOVER = "takeover"  # held by an expired lease: the holder crashed
    WAKE = "wake"  # waiting, and its event or timer has arrived
    CANCEL = "cancel"  # cancelled while claimed but idle: close it without running


class Skip(StrEnum):
    """Why a brief is not a candidate (shown by ``assay resync`` and ``--json``)."""

    NOT_TAKEN = "not taken by this desk"
    DEPENDS = "depends on an unmerged brief"
    CANCELLED = "cancelled"
    HELD = "held by a live claim"
    WAITING = "waiting; nothing has arrived"
    DONE = "done"
    MERGED = "merged"


class BriefLike(Protocol):
    id: str
    desk: str | None
    labels: Sequence[str]
    priority: Any
    depends_on: Sequence[str]


class ClaimLike(Protocol):
    state: str
    holder: str
    renewed_at: str
    lease_s: float
    waiting_for: str | None


@dataclass(frozen=True)
class Candidate:
    brief: str
    why: Why
    priority: float


def _priority(value: Any) -> float:
    """Higher numbers first; ``P0``-style strings read as 0 = most urgent."""
    if isinstance(value, bool) or value is None:
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip().lower()
    if text.startswith("p") and text[1:].isdigit():
        return -float(text[1:])
    return {"critical": 3.0, "high": 2.0, "normal": 1.0, "medium": 1.0, "low": 0.0}.get(text, 0.0)


def expired(claim: ClaimLike, *, now: datetime, skew_s: float) -> bool:
    """DESIGN §5: ``now > renewed_at + lease_s + skew`` (the one rule, ``assay.states``).

    Claims reach selection through the strict decoder, whose times always parse."""
    return lease_expired(parse_time(claim.renewed_at), claim.lease_s, now=now, skew_s=skew_s)


def classify(
    brief: BriefLike,
    claim: ClaimLike | None,
    *,
    desk_takes: Callable[[BriefLike], bool],
    merged: set[str],
    cancelled: set[str],
    arrived: Callable[[str], bool],
    now: datetime,
    skew_s: float,
    reclaim: str = "",
) -> Why | Skip:
    """Decide one brief for one desk; ``reclaim``: a holder token no live process on this
    machine runs under (the caller holds its lock), whose held claims are taken at once."""
    if brief.id in merged:
        return Skip.MERGED
    if not desk_takes(brief):
        return Skip.NOT_TAKEN
    if brief.id in cancelled:
        idle = claim is not None and (
            claim.state in {"released", "waiting"}
            or (claim.state == "held" and expired(claim, now=now, skew_s=skew_s))
        )
        return Why.CANCEL if idle else Skip.CANCELLED
    if any(dep not in merged for dep in brief.depends_on):
        return Skip.DEPENDS
    if claim is None:
        return Why.NEW
    rule = CLAIM_STATES.get(claim.state)  # how each claim state is taken: assay.states
    if rule is None or rule.finished:
        return Skip.DONE if rule else Skip.HELD
    if rule.lease:
        if reclaim and claim.holder == reclaim:
            return Why.TAKEOVER  # its process is provably dead: no lease to wait out
        return Why.TAKEOVER if expired(claim, now=now, skew_s=skew_s) else Skip.HELD
    if rule.take == "wake":
        return Why.WAKE if arrived(brief.id) else Skip.WAITING
    return Why.RESUME if rule.take == "resume" else Why.TAKEOVER


def queue(
    briefs: Mapping[str, BriefLike],
    claims: Mapping[str, ClaimLike],
    *,
    desk_takes: Callable[[BriefLike], bool],
    merged: set[str],
    cancelled: set[str],
    arrived: Callable[[str], bool],
    now: datetime,
    skew_s: float = 30.0,
    only: str | None = None,
    spread: str = "",
    reclaim: str = "",
) -> list[Candidate]:
    """The candidates for one desk, highest priority first, then by id (or, with
    ``spread``, by an order of that holder's own within each priority)."""
    found = []
    for brief_id, brief in briefs.items():
        if only is not None and brief_id != only:
            continue
        decision = classify(
            brief,
            claims.get(brief_id),
            desk_takes=desk_takes,
            merged=merged,
            cancelled=cancelled,
            arrived=arrived,
            now=now,
            skew_s=skew_s,
            reclaim=reclaim,
        )
        if isinstance(decision, Why):
            found.append(Candidate(brief_id, decision, _priority(brief.priority)))
    if spread:
        # Desks racing for the same queue would all try the same brief first and all but
        # one lose the push; within one priority each holder walks the briefs in its own
        # (stable) order instead, so concurrent desks mostly claim different briefs.
        found.sort(key=lambda c: (-c.priority, _mix(spread, c.brief)))
    else:
        found.sort(key=lambda c: (-c.priority, c.brief))
    return found


def _mix(holder: str, brief: str) -> str:
    return hashlib.sha256(f"{holder}\0{brief}".encode()).hexdigest()
