"""Synthetic board states for the renderer tests and the benchmark (no forge needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from assay.forgestate.briefs import EvidenceCounts
from assay.forgestate.rows import BoardState, BriefRow, Session

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STATES = ("held", "waiting", "stuck", "released", "queued", "done", "paused", "expired")


def synthetic_board(count: int) -> BoardState:
    """``count`` briefs spread over every state, with runs, sessions, usage and evidence."""
    rows = []
    for index in range(count):
        state = STATES[index % len(STATES)]
        started = BASE + timedelta(minutes=index)
        claimed = state != "queued"
        sessions = (
            (
                Session(started, started + timedelta(seconds=40 + index % 17), fence=1),
                Session(
                    started + timedelta(hours=2),
                    started + timedelta(hours=2, seconds=25),
                    fence=2,
                ),
            )
            if claimed
            else ()
        )
        rows.append(
            BriefRow(
                id=f"brief-{index:04d}",
                title=f"Brief number {index} | with a pipe <and markup>",
                state=state,
                desk="coder" if index % 2 else "reviewer",
                holder=f"host-{index % 5}" if claimed else "",
                fence=2 if claimed else 0,
                attempt=2 if claimed else 0,
                lease_s=60,
                renewed_at=started + timedelta(hours=2, seconds=25) if claimed else None,
                waiting_for="approval" if state == "waiting" else "",
                last_step="model" if claimed else "",
                last_step_at=started + timedelta(hours=2, seconds=25) if claimed else None,
                last_kind="wait" if state == "waiting" else "step",
                steps=index % 40 if claimed else 0,
                model_calls=index % 9 if claimed else 0,
                tokens_in=100 * (index % 13),
                tokens_out=50 * (index % 7),
                usd=0.0013 * (index % 11),
                evidence=EvidenceCounts(rows=3, claimed=3, verified=index % 4, stale=index % 2),
                review=f"refs/assay/reviews/brief-{index:04d}" if index % 3 == 0 else "",
                run_started=started if claimed else None,
                run_last=started + timedelta(hours=2, seconds=25) if claimed else None,
                sessions=sessions,
                status_note="stuck: desk silent" if state == "stuck" else "",
            )
        )
    return BoardState(
        forge="file:///srv/forge.git",
        main="0123456789abcdef0123456789abcdef01234567",
        as_of=BASE + timedelta(days=1),
        rows=tuple(rows),
    )
