"""The sweepers' plans as pure functions of a snapshot: what each kind does and does not do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from assay.forgestate.snapshot import BriefInfo, ClaimInfo, EventInfo, ForgeSnapshot, JournalInfo
from assay.sweep.plan import arrived_event, find_orphans, plan
from assay.sweep.policy import default_policies, parse_policy

NOW = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def _claim(
    brief: str, state: str, *, renewed_s_ago: float = 0, lease_s: float = 60, **kw: object
) -> ClaimInfo:
    return ClaimInfo(
        brief=brief,
        desk="coder",
        holder="h1",
        fence=3,
        state=state,
        renewed_at=NOW - timedelta(seconds=renewed_s_ago),
        lease_s=lease_s,
        **kw,  # type: ignore[arg-type]
    )


def _snapshot(**kw: object) -> ForgeSnapshot:
    return ForgeSnapshot(url="file:///f", **kw)  # type: ignore[arg-type]


def test_expired_claims_are_marked_stuck_naming_desk_and_last_step() -> None:
    journal = JournalInfo(
        last_step="write_file",
        last_step_at=NOW - timedelta(seconds=200),
        last_at=NOW - timedelta(seconds=200),
    )
    snapshot = _snapshot(
        briefs={"a": BriefInfo("a"), "b": BriefInfo("b")},
        claims={
            "a": _claim("a", "held", renewed_s_ago=95),
            "b": _claim("b", "held", renewed_s_ago=85),
        },
        journals={"a": journal},
    )
    actions = plan(snapshot, [parse_policy({"kind": "stuck-claims"}, source="s.yaml")], NOW)
    assert [(a.action, a.brief) for a in actions] == [("mark-stuck", "a")]  # b: within skew
    note = actions[0].note
    assert "desk coder" in note and "write_file" in note and "3m20s" not in note
    assert "silent for 1m35s" in note  # the renewal is more recent than the last step
    assert actions[0].status is not None and actions[0].status["state"] == "stuck"
    assert actions[0].status["last_step"] == "write_file"


def test_a_stuck_claim_is_not_planned_again() -> None:
    snapshot = _snapshot(
        briefs={"a": BriefInfo("a")}, claims={"a": _claim("a", "stuck", renewed_s_ago=500)}
    )
    assert plan(snapshot, default_policies(), NOW) == []


def test_waker_wakes_only_once_the_approval_arrived() -> None:
    claim = _claim("w", "waiting", renewed_s_ago=9999, waiting_for="approval")
    journal = JournalInfo(waiting_for="approval", consumed_events=frozenset({"e1"}))
    waker = [parse_policy({"kind": "waker"}, source="waker.yaml")]
    before = _snapshot(
        briefs={"w": BriefInfo("w")},
        claims={"w": claim},
        journals={"w": journal},
        events={"w": [EventInfo("e1", "approve"), EventInfo("e2", "signal")]},
    )
    assert plan(before, waker, NOW) == []  # e1 was consumed already; a signal is not an approval
    after = _snapshot(
        briefs={"w": BriefInfo("w")},
        claims={"w": claim},
        journals={"w": journal},
        events={"w": [EventInfo("e1", "approve"), EventInfo("e3", "approve")]},
    )
    [wake] = plan(after, waker, NOW)
    assert (wake.action, wake.brief, wake.detail["event"]) == ("wake", "w", "e3")
    dispatched = _snapshot(
        briefs={"w": BriefInfo("w")},
        claims={"w": claim},
        journals={"w": journal},
        events=after.events,
        statuses={"w": {"state": "woken", "event": "e3", "fence": 3, "at": "2026-05-01T08:59:00Z"}},
    )
    assert plan(dispatched, waker, NOW) == []  # already dispatched a minute ago


def test_timers_wake_when_due() -> None:
    claim = _claim("t", "waiting", waiting_for="timer")
    due = JournalInfo(waiting_for="timer", wait_until=NOW - timedelta(seconds=1))
    later = JournalInfo(waiting_for="timer", wait_until=NOW + timedelta(seconds=1))
    assert arrived_event(claim, due, [], NOW) == "timer:2026-05-01T08:59:59Z"
    assert arrived_event(claim, later, [], NOW) is None
    assert arrived_event(claim, later, [EventInfo("c", "cancel")], NOW) == "c"


def test_orphans_are_reported_once_and_deleted_only_with_fix() -> None:
    snapshot = _snapshot(
        briefs={"a": BriefInfo("a")},
        claims={"a": _claim("a", "done"), "ghost": _claim("ghost", "released")},
        refs={"refs/heads/assay/a": "1" * 40, "refs/heads/assay/stray": "2" * 40},
        reviews={"gone": "3" * 40},
    )
    assert [o[1] for o in find_orphans(snapshot)] == [
        "refs/assay/claims/ghost",
        "refs/assay/reviews/gone",
        "refs/heads/assay/stray",
    ]
    orphans = [parse_policy({"kind": "orphans"}, source="o.yaml")]
    reported = plan(snapshot, orphans, NOW)
    assert {a.action for a in reported} == {"report-orphan"}
    assert plan(snapshot, orphans, NOW, reported_orphans=frozenset(a.ref for a in reported)) == []
    fixed = plan(snapshot, orphans, NOW, fix=True)
    assert {a.action for a in fixed} == {"delete-ref"} and len(fixed) == 3


def test_budget_pauses_are_reported_with_what_was_spent() -> None:
    journal = JournalInfo(
        last_kind="budget",
        steps=12,
        model_calls=4,
        tokens_in=900,
        tokens_out=100,
        usd=0.25,
        fence=3,
    )
    snapshot = _snapshot(
        briefs={"p": BriefInfo("p")}, claims={"p": _claim("p", "released")}, journals={"p": journal}
    )
    budgets = [parse_policy({"kind": "budgets"}, source="b.yaml")]
    [report] = plan(snapshot, budgets, NOW)
    assert "12 steps, 4 model calls, 1000 tokens, $0.2500" in report.note
    assert report.status is not None
    settled = _snapshot(
        briefs=snapshot.briefs,
        claims=snapshot.claims,
        journals=snapshot.journals,
        statuses={"p": dict(report.status)},
    )
    assert plan(settled, budgets, NOW) == []


def test_working_status_without_a_live_claim_is_corrected() -> None:
    snapshot = _snapshot(
        briefs={"x": BriefInfo("x"), "y": BriefInfo("y"), "z": BriefInfo("z")},
        claims={"x": _claim("x", "done"), "y": _claim("y", "held", renewed_s_ago=5)},
        statuses={"x": {"state": "working"}, "y": {"state": "working"}, "z": {"state": "working"}},
    )
    actions = plan(snapshot, default_policies(), NOW)
    assert [(a.brief, a.status["state"]) for a in actions if a.status] == [
        ("x", "closed"),
        ("z", "queued"),
    ]


def test_a_stuck_brief_gets_one_status_even_when_honest_status_runs_too() -> None:
    snapshot = _snapshot(
        briefs={"a": BriefInfo("a")},
        claims={"a": _claim("a", "held", renewed_s_ago=500)},
        statuses={"a": {"state": "working"}},
    )
    policies = list(reversed(default_policies()))  # file order must not matter
    actions = plan(snapshot, policies, NOW)
    assert [(a.action, a.brief) for a in actions] == [("mark-stuck", "a")]


def test_the_wakers_event_rule_agrees_with_the_runtimes() -> None:
    from assay.runtime import Event

    cases = [
        ("approve", {}, "approval"),
        ("reject", {}, "approval"),
        ("approve", {"name": "deploy"}, "approval"),
        ("approve", {"name": "deploy"}, "deploy"),
        ("signal", {}, "approval"),
        ("signal", {}, "signal"),
        ("signal", {"name": "go"}, "go"),
        ("timer", {}, "timer"),
        ("cancel", {}, "approval"),
    ]
    for kind, data, waiting_for in cases:
        mine = EventInfo("e", kind, data=data).satisfies(waiting_for)
        theirs = Event(id="e", kind=kind, data=dict(data)).satisfies(waiting_for)
        assert mine == theirs, (kind, data, waiting_for)
