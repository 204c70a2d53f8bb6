"""From a ``ForgeSnapshot`` to a ``BoardState``: one row per brief, its state and evidence
judged by the read model's own rules (``assay.forgestate.briefs``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import assay.refs as refs
from assay.board.model import BoardState, BriefRow
from assay.board.notes import why
from assay.forgestate.briefs import DEFAULT_SKEW_S, brief_evidence, state_of
from assay.forgestate.snapshot import ForgeSnapshot, JournalInfo

_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")


def _review(snapshot: ForgeSnapshot, brief: str) -> str:
    """Where the review is, and its state: ``refs/assay/reviews/<brief> (ready)``."""
    if brief not in snapshot.reviews:
        return ""
    state = snapshot.review_states.get(brief)
    return refs.REVIEWS + brief + (f" ({state})" if state else "")


def board_from_snapshot(
    snapshot: ForgeSnapshot,
    *,
    now: datetime | None = None,
    skew_s: float = DEFAULT_SKEW_S,
) -> BoardState:
    """The board of ``snapshot``, as of ``now`` or else the latest instant the forge records."""
    as_of = now or snapshot.latest_instant() or _EPOCH
    key_known = bool(snapshot.evidence_key)
    ids = sorted(set(snapshot.briefs) | set(snapshot.claims) | set(snapshot.invalid))
    return BoardState(
        forge=snapshot.url,
        main=snapshot.main,
        as_of=as_of,
        rows=tuple(
            _row(snapshot, brief_id, as_of=as_of, skew_s=skew_s, key_known=key_known)
            for brief_id in ids
        ),
        as_of_source="now" if now is not None else "forge",
    )


def _row(
    snapshot: ForgeSnapshot, brief_id: str, *, as_of: datetime, skew_s: float, key_known: bool
) -> BriefRow:
    """One brief's row: its state by the one classification, its journal's figures."""
    brief = snapshot.briefs.get(brief_id)
    claim = snapshot.claims.get(brief_id)
    info = snapshot.journals.get(brief_id) or JournalInfo()
    evidence = brief_evidence(snapshot, brief_id, key_known=key_known)
    state = state_of(snapshot, brief_id, now=as_of, skew_s=skew_s, evidence=evidence)
    return BriefRow(
        id=brief_id,
        title=brief.title if brief else "",
        state=state.value,
        desk=(claim.desk if claim else "") or (brief.desk if brief else ""),
        holder=claim.holder if claim else "",
        fence=claim.fence if claim else info.fence,
        attempt=claim.attempt if claim else 0,
        lease_s=claim.lease_s if claim else 0.0,
        renewed_at=claim.renewed_at if claim and claim.state == "held" else None,
        waiting_for=(claim.waiting_for if claim else "") or info.waiting_for,
        last_step=info.last_step,
        last_step_at=info.last_step_at,
        last_kind=info.last_kind,
        steps=info.steps,
        model_calls=info.model_calls,
        repeated_requests=info.repeated_requests,
        repaid_model_calls=info.repaid_model_calls,
        tokens_in=info.tokens_in,
        tokens_out=info.tokens_out,
        usd=info.usd,
        evidence=evidence,
        review=_review(snapshot, brief_id),
        run_started=info.first_at,
        run_last=info.last_at,
        sessions=info.sessions,
        status_note=_note(
            why(
                snapshot,
                brief_id,
                state,
                as_of=as_of,
                evidence=evidence,
                fence=claim.fence if claim else info.fence,
            ),
            info,
            snapshot.event_notes.get(brief_id, ()),
        ),
        journal_head=info.head,
    )


def _note(note: str, info: JournalInfo, skipped: Sequence[str] = ()) -> str:
    """The row's note; a run whose agent code ran unconfined says so first, and event
    records that were skipped (never delivered) are named last."""
    parts = ["unsandboxed run"] if info.unsandboxed else []
    parts += [note] if note else []
    return "; ".join([*parts, *skipped])


def collect_board(
    forge: Any, *, now: datetime | None = None, skew_s: float | None = None
) -> tuple[BoardState, dict[str, str]]:
    """The board of ``forge`` (one fetch) and the ``board_templates/`` found on its main.

    Leases are judged with the claims' own skew (``skew_s``, else ``ASSAY_CLAIM_SKEW``,
    else 30 s), as the desks judge them."""
    snapshot, state = collect_snapshot(forge, now=now, skew_s=skew_s)
    return state, dict(snapshot.templates)


def collect_snapshot(
    forge: Any, *, now: datetime | None = None, skew_s: float | None = None
) -> tuple[ForgeSnapshot, BoardState]:
    """``collect_board``, with the snapshot it was drawn from (the run pages read the
    branch tips and evidence records it holds)."""
    from assay.claims.record import skew_from_env
    from assay.forgestate.source import read_snapshot

    snapshot = read_snapshot(forge)
    return snapshot, board_from_snapshot(snapshot, now=now, skew_s=skew_from_env(skew_s))
