"""Process sessions and journal summaries read from journal entries."""

from __future__ import annotations

from assay.board.sessions import sessions
from assay.forgestate.snapshot import journal_info


def _t(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}Z"


ENTRIES = [
    {"kind": "takeover", "fence": 1, "t": _t(0)},
    {"kind": "start", "fence": 1, "t": _t(1)},
    {
        "kind": "step",
        "step": "model",
        "name": "model",
        "status": "ok",
        "fence": 1,
        "usage": {"in_tokens": 10, "out_tokens": 5, "usd": 0.5},
        "t0": _t(1),
        "t1": _t(3),
    },
    {"kind": "wait", "for": "approval", "fence": 1, "t": _t(4)},
    {"kind": "wake", "event": {"id": "e1", "kind": "approve"}, "fence": 2, "t": _t(20)},
    {"kind": "signal", "events": [{"id": "s1", "kind": "signal"}], "fence": 2, "t": _t(21)},
    {
        "kind": "step",
        "step": "tool",
        "name": "write_file",
        "status": "started",
        "fence": 2,
        "t0": _t(22),
    },
    {"kind": "takeover", "fence": 3, "t": _t(40)},
    {
        "kind": "step",
        "step": "tool",
        "name": "write_file",
        "status": "ok",
        "fence": 3,
        "t0": _t(40),
        "t1": _t(41),
    },
    {"kind": "end", "status": "ok", "fence": 3, "t": _t(42)},
]


def test_sessions_split_at_waits_and_takeovers_but_not_takeover_then_start() -> None:
    found = sessions(ENTRIES)
    assert [(s.fence, s.seconds) for s in found] == [(1, 4.0), (2, 2.0), (3, 2.0)]


def test_journal_info_sums_usage_and_tracks_waits_and_consumed_events() -> None:
    info = journal_info(ENTRIES, head="sha256:x")
    assert (info.steps, info.model_calls, info.tokens_in, info.tokens_out) == (2, 1, 10, 5)
    assert info.usd == 0.5
    # the documented step label (kind:name), as summarize() and divergence messages say it
    assert (info.last_step, info.last_kind, info.fence) == ("tool:write_file", "end", 3)
    assert info.consumed_events == {"e1", "s1"}
    assert info.waiting_for == ""  # woken since
    assert info.first_at is not None and info.last_at is not None
    waiting = journal_info(ENTRIES[:4])
    assert waiting.waiting_for == "approval" and waiting.last_kind == "wait"
