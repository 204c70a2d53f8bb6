"""A brief's state and evidence column, judged from a ``ForgeSnapshot``: what its board row,
``assay status`` and the honest-status sweeper all say.

A brief's state comes only from externally checkable signals (DESIGN §8): its claim record,
the lease clock, and what its journal last recorded. A claim still marked ``held`` whose
lease ran out is ``expired`` even before a sweeper marks it ``stuck``. Its evidence is
judged by the evidence package's own merge rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from assay.forgestate.snapshot import ClaimInfo, EvidenceInfo, ForgeSnapshot, JournalInfo
from assay.states import Facts, State, classify

DEFAULT_SKEW_S = 30.0


@dataclass(frozen=True)
class EvidenceCounts:
    """Acceptance rows of one brief, by who vouches for them."""

    rows: int = 0
    claimed: int = 0  # rows the desk says pass (its own word; never counts for merge)
    verified: int = 0  # rows the gate ran and saw pass at the current head
    failing: int = 0  # rows the gate ran and saw fail at the current head
    stale: int = 0  # rows the gate verified at an older head than the branch's tip
    unsigned: int = 0  # rows that pass only on unsigned records (--insecure-unsigned-evidence)
    unsandboxed: int = 0  # rows that passed only on the host (--insecure-unsandboxed-rows)
    holdout: int = 0  # of ``rows``, those the desk never saw (``assay holdout add``)
    holdout_passed: int = 0  # of those, the ones verified passing

    @property
    def label(self) -> str:
        """``verified/rows`` plus the other counts when they are not zero, e.g. ``2/3 c3 s1``."""
        if not self.rows and not (self.claimed or self.verified or self.stale):
            return "-"
        parts = [f"{self.verified}/{self.rows}"]
        if self.claimed:
            parts.append(f"claimed {self.claimed}")
        if self.failing:
            parts.append(f"failing {self.failing}")
        if self.stale:
            parts.append(f"stale {self.stale}")
        if self.unsigned:
            parts.append(f"unsigned {self.unsigned}")
        if self.unsandboxed:
            parts.append(f"unsandboxed {self.unsandboxed}")
        if self.holdout:
            parts.append(f"holdout {self.holdout_passed}/{self.holdout}")
        return " ".join(parts)


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


def brief_evidence(snapshot: ForgeSnapshot, brief_id: str, *, key_known: bool) -> EvidenceCounts:
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
        evidence = brief_evidence(snapshot, brief_id, key_known=bool(snapshot.evidence_key))
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
