"""Which brief a desk takes next: the pure rules of ``assay.desks.manifests.selection``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from assay.briefs import Brief, parse_brief
from assay.claims import ClaimRecord
from assay.desks.manifests.selection import Skip, Why, classify, queue
from tests.desks.world import brief_text

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def brief(brief_id: str, **front: Any) -> Brief:
    return parse_brief(brief_text(brief_id, **front), source=f"briefs/{brief_id}.md")


def claim(state: str, *, renewed_s_ago: float = 0, lease_s: float = 60) -> ClaimRecord:
    stamp = (NOW - timedelta(seconds=renewed_s_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return ClaimRecord(
        brief="b",
        desk="coder",
        holder="h",
        fence=1,
        state=state,  # type: ignore[arg-type]
        since=stamp,
        renewed_at=stamp,
        lease_s=lease_s,
        waiting_for="approval" if state == "waiting" else None,
    )


def decide(
    b: Brief,
    c: ClaimRecord | None = None,
    *,
    merged: set[str] | None = None,
    cancelled: set[str] | None = None,
    arrived: bool = False,
    takes: bool = True,
) -> Why | Skip:
    return classify(
        b,
        c,
        desk_takes=lambda _: takes,
        merged=merged or set(),
        cancelled=cancelled or set(),
        arrived=lambda _: arrived,
        now=NOW,
        skew_s=0,
    )


def test_claim_states_decide_what_taking_means() -> None:
    b = brief("b")
    assert decide(b) is Why.NEW
    assert decide(b, claim("released")) is Why.RESUME
    assert decide(b, claim("stuck")) is Why.TAKEOVER
    assert decide(b, claim("held", renewed_s_ago=10)) is Skip.HELD
    assert decide(b, claim("held", renewed_s_ago=61)) is Why.TAKEOVER
    assert decide(b, claim("done")) is Skip.DONE
    assert decide(b, claim("waiting")) is Skip.WAITING
    assert decide(b, claim("waiting"), arrived=True) is Why.WAKE


def test_dependencies_desks_merges_and_cancels() -> None:
    top = brief("top", depends_on=["base"])
    assert decide(top) is Skip.DEPENDS
    assert decide(top, merged={"base"}) is Why.NEW
    assert decide(brief("b"), takes=False) is Skip.NOT_TAKEN
    assert decide(brief("b"), merged={"b"}) is Skip.MERGED
    assert decide(brief("b"), cancelled={"b"}) is Skip.CANCELLED
    assert decide(brief("b"), claim("waiting"), cancelled={"b"}) is Why.CANCEL
    assert decide(brief("b"), claim("held", renewed_s_ago=1), cancelled={"b"}) is Skip.CANCELLED


def queue_all(briefs: dict[str, Brief], claims: dict[str, Any], **options: Any) -> list[Any]:
    """The queue of a desk that takes every brief, with nothing merged, cancelled or arrived."""
    return queue(
        briefs,
        claims,
        desk_takes=lambda _: True,
        merged=set(),
        cancelled=set(),
        arrived=lambda _: False,
        now=NOW,
        **options,
    )


def test_queue_orders_by_priority_then_id_and_filters() -> None:
    briefs = {
        "a": brief("a", priority=1),
        "z": brief("z", priority=5),
        "m": brief("m", priority=5),
        "dep": brief("dep", priority=9, depends_on=["a"]),
    }
    found = queue_all(briefs, {"a": claim("done")})
    assert [c.brief for c in found] == ["m", "z"]
    only = queue_all(briefs, {}, only="a")
    assert [(c.brief, c.why) for c in only] == [("a", Why.NEW)]


def test_spread_keeps_priority_but_gives_each_holder_its_own_order() -> None:
    briefs = {f"b{i}": brief(f"b{i}", priority=1) for i in range(8)}
    briefs["urgent"] = brief("urgent", priority=9)

    def order(holder: str) -> list[str]:
        return [c.brief for c in queue_all(briefs, {}, spread=holder)]

    first, second = order("host-1"), order("host-2")
    assert first[0] == second[0] == "urgent"
    assert sorted(first) == sorted(second) == sorted(briefs)
    assert first != second
    assert order("host-1") == first  # stable for one holder
