"""Every brief's row, judged from the read model: what the board, ``assay status`` and
``assay resync`` all show.

``BoardState`` is a plain value: ``board_from_snapshot`` judges it from a ``ForgeSnapshot``
(each row's state and evidence by ``assay.forgestate.briefs``, its note by
``assay.forgestate.notes``), and ``collect_board`` reads the forge for it in one fetch. The
renderers (``assay.board.render``), ``assay status`` and resync only read it. Keeping the
two apart is what makes the board deterministic: rendering is a pure function of this value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import assay.refs as refs
from assay.forgestate.briefs import DEFAULT_SKEW_S, brief_evidence, state_of
from assay.forgestate.briefs import EvidenceCounts as EvidenceCounts  # re-exported: a column
from assay.forgestate.notes import why
from assay.forgestate.snapshot import ForgeSnapshot, JournalInfo
from assay.forgestate.times import iso
from assay.journal.fold import Session as Session  # re-exported: the board shows sessions
from assay.states import ORDER, TITLES, State

# The order groups appear in on the board, and their headings: the one vocabulary's.
STATE_ORDER: tuple[str, ...] = tuple(str(state) for state in ORDER)
STATE_TITLES: dict[str, str] = {str(state): title for state, title in TITLES.items()}


@dataclass(frozen=True)
class BriefRow:
    """Everything the board says about one brief."""

    id: str
    title: str = ""
    state: str = State.QUEUED.value
    desk: str = ""
    holder: str = ""
    fence: int = 0
    attempt: int = 0
    lease_s: float = 0.0
    renewed_at: datetime | None = None
    waiting_for: str = ""
    last_step: str = ""
    last_step_at: datetime | None = None
    last_kind: str = ""
    steps: int = 0
    model_calls: int = 0
    repeated_requests: int = 0  # requests sent upstream again: the one in flight at a kill
    repaid_model_calls: int = 0  # calls a lost machine took with it (not yet pushed): paid again
    tokens_in: int = 0
    tokens_out: int = 0
    usd: float = 0.0
    evidence: EvidenceCounts = field(default_factory=EvidenceCounts)
    review: str = ""
    run_started: datetime | None = None
    run_last: datetime | None = None
    sessions: tuple[Session, ...] = ()
    status_note: str = ""
    journal_head: str = ""

    @property
    def held_s(self) -> float:
        """Seconds a process actually held this run, over all its sessions."""
        return sum(session.seconds for session in self.sessions)

    def lease_age_s(self, as_of: datetime) -> float | None:
        """Seconds since the claim was last renewed, as of ``as_of``."""
        if self.renewed_at is None:
            return None
        return max(0.0, (as_of - self.renewed_at).total_seconds())

    def run_age_s(self, as_of: datetime) -> float | None:
        """Wall-clock seconds from the run's first entry to ``as_of`` (or its end when done)."""
        if self.run_started is None:
            return None
        finished = self.state in STATE_ORDER and State(self.state).finished
        end = self.run_last if finished and self.run_last else as_of
        return max(0.0, (end - self.run_started).total_seconds())

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass(frozen=True)
class Totals:
    """Sums over every row of the board."""

    briefs: int = 0
    by_state: tuple[tuple[str, int], ...] = ()
    steps: int = 0
    model_calls: int = 0
    repeated_requests: int = 0
    repaid_model_calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    run_age_s: float = 0.0
    held_s: float = 0.0
    rows: int = 0
    verified: int = 0

    @property
    def idle_fraction(self) -> float:
        """The share of the runs' wall-clock age during which no process was held."""
        if self.run_age_s <= 0:
            return 0.0
        return max(0.0, 1.0 - self.held_s / self.run_age_s)


@dataclass(frozen=True)
class BoardState:
    """The whole board: rows, when it is "as of", and which forge it describes.

    ``as_of`` is the time the board is drawn at. It is the ``--now`` the caller passed, or
    else the latest instant the forge itself records (a lease renewal, a journal entry), so
    that the same forge state always yields the same board.
    """

    forge: str
    main: str  # the commit of main the briefs were read from ("" when main is absent)
    as_of: datetime
    rows: tuple[BriefRow, ...]
    as_of_source: str = "forge"  # "forge" (latest recorded instant) or "now" (passed in)

    def groups(self) -> list[tuple[str, str, list[BriefRow]]]:
        """``(state, title, rows)`` in board order, skipping empty groups; rows sorted by id."""
        by_state: dict[str, list[BriefRow]] = {}
        for row in self.rows:
            by_state.setdefault(row.state, []).append(row)
        ordered = [s for s in STATE_ORDER if s in by_state]
        ordered += sorted(s for s in by_state if s not in STATE_ORDER)
        return [
            (state, STATE_TITLES.get(state, state), sorted(by_state[state], key=lambda r: r.id))
            for state in ordered
        ]

    def totals(self) -> Totals:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.state] = counts.get(row.state, 0) + 1
        by_state = tuple(
            (state, counts[state])
            for state in [*STATE_ORDER, *sorted(set(counts) - set(STATE_ORDER))]
            if state in counts
        )
        return Totals(
            briefs=sum(1 for row in self.rows if row.state != "orphan"),
            by_state=by_state,
            steps=sum(row.steps for row in self.rows),
            model_calls=sum(row.model_calls for row in self.rows),
            repeated_requests=sum(row.repeated_requests for row in self.rows),
            repaid_model_calls=sum(row.repaid_model_calls for row in self.rows),
            tokens=sum(row.tokens for row in self.rows),
            usd=round(sum(row.usd for row in self.rows), 6),
            run_age_s=sum(row.run_age_s(self.as_of) or 0.0 for row in self.rows),
            held_s=sum(row.held_s for row in self.rows),
            rows=sum(row.evidence.rows for row in self.rows),
            verified=sum(row.evidence.verified for row in self.rows),
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``assay status --json``); times as ISO-8601 UTC strings."""
        rows = []
        for row in sorted(self.rows, key=lambda r: (_state_rank(r.state), r.id)):
            data = _jsonable(asdict(row))
            data["held_s"] = round(row.held_s, 3)
            data["lease_age_s"] = _round(row.lease_age_s(self.as_of))
            data["run_age_s"] = _round(row.run_age_s(self.as_of))
            data["tokens"] = row.tokens
            data["evidence"]["label"] = row.evidence.label
            rows.append(data)
        totals = self.totals()
        return {
            "forge": self.forge,
            "main": self.main,
            "as_of": iso(self.as_of),
            "as_of_source": self.as_of_source,
            "totals": {
                **_jsonable(asdict(totals)),
                "by_state": dict(totals.by_state),
                "idle_fraction": round(totals.idle_fraction, 4),
            },
            "briefs": rows,
        }


def _state_rank(state: str) -> int:
    return STATE_ORDER.index(state) if state in STATE_ORDER else len(STATE_ORDER)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    return value


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
