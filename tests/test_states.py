"""The one brief-state classification and the lease-expiry and arrival rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from assay.forgestate.snapshot import EventInfo
from assay.states import Facts, State, arrival, classify, lease_expired

NOW = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def test_a_finished_brief_is_refused_in_review_closed_or_merged_never_done() -> None:
    done = Facts(claim="done", review="ready")
    assert classify(done) is State.IN_REVIEW
    assert classify(Facts(claim="done", review="ready", refused=True)) is State.REFUSED
    assert classify(Facts(claim="done", review="merged", refused=True)) is State.MERGED
    assert classify(Facts(claim="done", merged=True)) is State.MERGED
    assert classify(Facts(claim="done")) is State.CLOSED
    assert "done" not in {state.value for state in State}


def test_invalid_wins_and_every_claim_state_has_one_brief_state() -> None:
    assert classify(Facts(claim="held", invalid="claim: bad")) is State.INVALID
    assert classify(Facts(claim=None)) is State.QUEUED
    assert classify(Facts(claim=None, cancelled=True)) is State.CANCELLED
    assert classify(Facts(claim="released", cancelled=True)) is State.CANCELLED
    assert classify(Facts(claim="held", lease_expired=True)) is State.EXPIRED
    assert classify(Facts(claim="held")) is State.HELD
    assert classify(Facts(claim="stuck")) is State.STUCK
    assert classify(Facts(claim="waiting")) is State.WAITING
    assert classify(Facts(claim="waiting", paused=True)) is State.PAUSED
    assert classify(Facts(claim="released")) is State.RELEASED
    assert classify(Facts(on_main=False, claim="held")) is State.ORPHAN


def test_the_lease_expires_strictly_after_renewal_plus_lease_plus_skew() -> None:
    renewed = NOW - timedelta(seconds=40)
    assert not lease_expired(renewed, 10, now=NOW, skew_s=30)
    assert lease_expired(renewed, 10, now=NOW + timedelta(milliseconds=1), skew_s=30)
    assert not lease_expired(None, 10, now=NOW, skew_s=0)


def test_arrival_skips_consumed_events_and_honours_timers() -> None:
    events = [EventInfo("a1", "approve"), EventInfo("a2", "approve")]
    assert arrival("approval", events, consumed={"a1"}, wait_until=None) == "a2"
    assert arrival("approval", events, consumed={"a1", "a2"}, wait_until=None) is None
    assert arrival("deploy", [EventInfo("c", "cancel")], consumed=(), wait_until=None) == "c"
    due = NOW - timedelta(seconds=1)
    assert arrival("", [], consumed=(), wait_until=due, now=NOW) == "timer:2026-05-01T08:59:59Z"
    assert arrival("", [], consumed=(), wait_until=NOW + timedelta(1), now=NOW) is None
    assert arrival("timer:2026-05-01T08:00:00Z", [], consumed=(), wait_until=None, now=NOW)


def test_every_state_has_a_title_and_a_colour_and_every_claim_state_a_rule() -> None:
    from assay.claims.record import STATES
    from assay.states import CLAIM_STATES, COLOURS, TITLES, claim_takeable

    assert set(TITLES) == set(COLOURS) == set(State)
    assert tuple(CLAIM_STATES) == STATES
    # What the claims store lets a desk take, by the one table.
    assert claim_takeable("released", expired=False, wake=False)
    assert claim_takeable("stuck", expired=False, wake=False)
    assert not claim_takeable("held", expired=False, wake=True)
    assert claim_takeable("held", expired=True, wake=False)
    assert not claim_takeable("waiting", expired=True, wake=False)
    assert claim_takeable("waiting", expired=False, wake=True)
    assert not claim_takeable("done", expired=True, wake=True)
    assert not claim_takeable("no such state", expired=True, wake=True)
    assert classify(Facts(claim="no such state")) is State.INVALID
