"""From a ``ForgeSnapshot`` to a ``BoardState``: one row per brief, its state judged honestly.

A brief's state comes only from externally checkable signals (DESIGN §8): its claim record,
the lease clock, and what its journal last recorded. A claim still marked ``held`` whose
lease ran out is shown as ``expired`` even before a sweeper marks it ``stuck``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import assay.refs as refs
from assay.board.model import BoardState, BriefRow, EvidenceCounts
from assay.board.notes import why
from assay.board.snapshot import ClaimInfo, EvidenceInfo, ForgeSnapshot, JournalInfo
from assay.states import Facts, State, classify

DEFAULT_SKEW_S = 30.0
_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")


def brief_state(
    claim: ClaimInfo | None,
    journal: JournalInfo | None,
    *,
    on_main: bool,
    now: datetime,
    skew_s: float = DEFAULT_SKEW_S,
    merged: bool = False,
    review: str = "",
    refused: bool = False,
    cancelled: bool = False,
    invalid: str = "",
) -> State:
    """The state of one brief, by the one classification (``assay.states.classify``)."""
    paused = journal is not None and journal.last_kind == "budget"
    facts = Facts(
        on_main=on_main,
        invalid=invalid,
        claim=claim.state if claim is not None else None,
        lease_expired=claim is not None and claim.expired(now, skew_s),
        paused=paused or (claim is not None and claim.waiting_for == "budget"),
        merged=merged,
        review=review,
        refused=refused,
        cancelled=cancelled,
    )
    return classify(facts)


def evidence_counts(
    rows: Sequence[str],
    records: Sequence[EvidenceInfo],
    claimed: dict[str, str],
    head: str,
    *,
    brief: str,
    commands: Sequence[str] = (),
    desk_names: Collection[str] = (),
    require_signed: bool = True,
    key_known: bool = False,
    holdout: Sequence[tuple[str, str]] = (),
) -> EvidenceCounts:
    """The evidence column, judged by the evidence package's own merge rule (``decide``):
    a row is verified only when a record that counts (written by the gate, not by the
    claim's desk or holder; signed by the gate) passed at ``head`` for the row's
    current command. A record at another head or for an older command is stale; with no
    head known (no branch, no review), nothing is verified."""
    from assay.evidence.rule import Verdict, decide
    from assay.evidence.spec import EnvDecl, RowSpec

    # Rows without a known command (a brief cache from before commands were kept) never
    # match a record's command, so they show as stale rather than verified.
    specs = [RowSpec(id=row, command=command) for row, command in zip(rows, commands, strict=False)]
    specs += [RowSpec(id=row, command="") for row in rows[len(commands) :]]
    specs += [RowSpec(id=row, command=command) for row, command in holdout]
    hidden = {row for row, _ in holdout}

    def judged(signed: bool, *, only: set[str] | None = None) -> Counter[Verdict]:
        decision = decide(
            brief=brief,  # a record naming another brief never counts here
            rows=[spec for spec in specs if only is None or spec.id in only],
            records=[r.record for r in records if r.record is not None],
            head_sha=head,
            env=EnvDecl(),
            desk_names=frozenset(desk_names),
            require_signed=signed,
            key_known=key_known,
        )
        return Counter(status.verdict for status in decision.rows)

    verdicts = judged(require_signed)
    # Rows that would pass if unsigned records counted: the insecure choice, made visible.
    unsigned = judged(False)[Verdict.PASS] - verdicts[Verdict.PASS] if require_signed else 0
    all_rows = set(rows) | hidden | {r.row for r in records} | set(claimed)
    return EvidenceCounts(
        rows=len(all_rows),
        claimed=sum(1 for result in claimed.values() if result == "pass"),
        verified=verdicts[Verdict.PASS],
        failing=verdicts[Verdict.FAILING] + verdicts[Verdict.ENV_MISMATCH],
        stale=verdicts[Verdict.STALE],
        unsigned=unsigned,
        unsandboxed=verdicts[Verdict.UNSANDBOXED],
        holdout=len(hidden),
        holdout_passed=judged(require_signed, only=hidden)[Verdict.PASS] if hidden else 0,
    )


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


def _evidence(snapshot: ForgeSnapshot, brief_id: str, *, key_known: bool) -> EvidenceCounts:
    """The brief's evidence column, judged at the review's current head: the branch's tip,
    else the review record's head_sha."""
    brief = snapshot.briefs.get(brief_id)
    claim = snapshot.claims.get(brief_id)
    journal = snapshot.journals.get(brief_id)
    return evidence_counts(
        brief.rows if brief else (),
        snapshot.evidence.get(brief_id, ()),
        dict(journal.claimed) if journal else {},
        snapshot.branch(brief_id) or snapshot.review_heads.get(brief_id, ""),
        brief=brief_id,
        commands=brief.commands if brief else (),
        desk_names={claim.desk, claim.holder} - {""} if claim else (),
        key_known=key_known,
        holdout=snapshot.holdout.get(brief_id, ()),
    )


def state_of(
    snapshot: ForgeSnapshot,
    brief_id: str,
    *,
    now: datetime,
    skew_s: float = DEFAULT_SKEW_S,
    evidence: EvidenceCounts | None = None,
) -> State:
    """The state of ``brief_id`` in ``snapshot``: what its board row, ``assay status`` and
    the honest-status sweeper all say (``evidence``: its column, when already judged)."""
    if evidence is None:
        evidence = _evidence(snapshot, brief_id, key_known=bool(snapshot.evidence_key))
    return brief_state(
        snapshot.claims.get(brief_id),
        snapshot.journals.get(brief_id),
        on_main=brief_id in snapshot.briefs,
        now=now,
        skew_s=skew_s,
        merged=snapshot.is_merged(brief_id),
        review=snapshot.review_states.get(brief_id, ""),
        refused=evidence.failing > 0,
        cancelled=snapshot.cancelled(brief_id),
        invalid=snapshot.invalid_reason(brief_id),
    )


def _row(
    snapshot: ForgeSnapshot, brief_id: str, *, as_of: datetime, skew_s: float, key_known: bool
) -> BriefRow:
    """One brief's row: its state by the one classification, its journal's figures."""
    brief = snapshot.briefs.get(brief_id)
    claim = snapshot.claims.get(brief_id)
    info = snapshot.journals.get(brief_id) or JournalInfo()
    evidence = _evidence(snapshot, brief_id, key_known=key_known)
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
    from assay.board.source import read_snapshot
    from assay.claims.record import skew_from_env

    skew_s = skew_from_env(skew_s)

    snapshot = read_snapshot(forge)
    return board_from_snapshot(snapshot, now=now, skew_s=skew_s), dict(snapshot.templates)
