"""Journal anchors: the journal heads a brief's claim history vouches for, and the check.

Every claim renewal records the journal head its desk had pushed (``journal_head``), and the
settlement (``done``, ``waiting``) keeps the last one. Those heads are *anchors*: the
branch's journal may only have grown past them. So a journal on the branch

- must pass through every head anchored on the claim's history (a line whose ``sum`` is
  that head): a journal edited and re-chained, or truncated below an anchor, does not;
- must end exactly at the head the claim was settled with: lines dropped from the end
  (usage erased, the ``end`` gone), or a deleted last segment, do not.

Any miss is ``Corrupt`` (exit 6) naming the brief, the anchor and the claim commit that
recorded it. ``assay verify``, ``assay merge`` and ``assay history --brief`` check it; the
board shows the same problem through ``anchor_problem`` on the latest claim record.

The gate also fails closed where a record is missing (``vouching_problems``): the review's
head must be a run its claim settled, so a journal whose claim ref was deleted, or whose
claim is still held, released or stuck, is refused, never passed for having no anchors to
miss.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import assay.refs as refs
from assay.claims.record import ClaimCodec
from assay.errors import BadInput, Corrupt
from assay.forge import Forge
from assay.forge.records import walk
from assay.journal import Journal

# States in which no desk runs, so the branch's journal must end at the anchored head.
SETTLED_STATES = frozenset({"done", "waiting"})
_HISTORY_LIMIT = 5000


@dataclass(frozen=True)
class Anchor:
    head: str  # "sha256:…", a journal line's sum
    claim_sha: str  # the claim commit that recorded it


@dataclass(frozen=True)
class ClaimAnchors:
    """The anchors of one brief's claim history, oldest first, and its settled head."""

    brief: str
    anchors: tuple[Anchor, ...] = ()
    settled: Anchor | None = None
    state: str | None = None  # the latest claim record's state; None: no claim ref at all
    attempt: int = 0  # the latest claim record's attempt (which run of the brief it is)

    @property
    def empty(self) -> bool:
        return not self.anchors


def line_hashes(entries: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """Every line hash of a verified journal (each line's ``sum``)."""
    return frozenset(str(entry["sum"]) for entry in entries if entry.get("sum"))


def read_claim_anchors(forge: Forge, brief: str, claim_tip: str | None) -> ClaimAnchors:
    """The anchors along the claim ref's history (already fetched); ``Corrupt`` if a record is."""
    if claim_tip is None:
        return ClaimAnchors(brief)
    with forge.batch() as reader:
        entries = walk(reader, ClaimCodec(brief), claim_tip, limit=_HISTORY_LIMIT)
    records = [entry.record for entry in entries]  # oldest first, each with its commit
    anchors: list[Anchor] = []
    seen: set[str] = set()
    for record in records:
        if record.journal_head and record.journal_head not in seen:
            seen.add(record.journal_head)
            anchors.append(Anchor(record.journal_head, record.sha))
    latest = records[-1] if records else None
    settled = None
    if latest is not None and latest.state in SETTLED_STATES and latest.journal_head:
        settled = Anchor(latest.journal_head, latest.sha)
    if latest is None:
        return ClaimAnchors(brief, tuple(anchors), settled)
    return ClaimAnchors(brief, tuple(anchors), settled, latest.state, latest.attempt)


def anchor_problems(
    hashes: Collection[str], head: str, anchors: ClaimAnchors, *, where: str
) -> list[str]:
    """Why a journal (its line hashes and head) does not honour ``anchors``; empty when it does."""
    problems: list[str] = []
    for anchor in anchors.anchors:
        if anchor.head not in hashes:
            problems.append(
                f"{where}: the journal no longer passes through {anchor.head}, anchored by "
                f"claim commit {anchor.claim_sha[:12]}: it was rewritten or truncated"
            )
            break  # the first missing anchor says it; later ones would repeat it
    settled = anchors.settled
    if settled is not None and head != settled.head:
        problems.append(
            f"{where}: the journal ends at {head or '(empty)'}, but the claim was settled at "
            f"{settled.head} (claim commit {settled.claim_sha[:12]}): lines or a segment are "
            "missing or were replaced"
        )
    return problems


def vouching_problems(journal_head: str, anchors: ClaimAnchors, *, where: str) -> list[str]:
    """Why no settled claim vouches for a journal the gate is asked to judge (the review's
    head); empty when one does. Missing records refuse: the anchors alone pass a journal
    whose claim ref was deleted, since there is then nothing for it to miss."""
    claim = refs.claim_ref(anchors.brief)
    if anchors.state is None:
        return [
            f"{where}: no claim history vouches for it ({claim} is missing): only a run "
            "its desk's claim settled is judged"
        ]
    if anchors.state not in SETTLED_STATES:
        return [
            f"{where}: the claim is {anchors.state}, not settled at the journal's head "
            f"({claim}): nothing vouches for the journal yet"
        ]
    if anchors.settled is None and journal_head:
        return [
            f"{where}: the claim was settled without a journal head, but the journal ends "
            f"at {journal_head}"
        ]
    return []


def check_anchors(
    entries: Sequence[Mapping[str, Any]],
    head: str,
    anchors: ClaimAnchors,
    *,
    where: str,
    vouched: bool = False,
) -> None:
    """``Corrupt`` unless the journal passes through every anchor and ends at the settled one;
    ``vouched`` (the gate): and unless a settled claim vouches for it at all."""
    problems = anchor_problems(line_hashes(entries), head, anchors, where=where)
    if vouched:
        problems += vouching_problems(head, anchors, where=where)
    if problems:
        raise Corrupt("; ".join(problems), brief=anchors.brief)


def anchor_problem(
    claim: Mapping[str, Any] | None,
    entries: Sequence[Mapping[str, Any]],
    head: str,
    *,
    claim_sha: str = "",
) -> str:
    """The board's cheap form: the latest claim record (its parsed JSON) against the journal.

    One anchor instead of the whole history; "" when it holds or the record has none.
    """
    if not isinstance(claim, Mapping):
        return ""
    anchored, state = claim.get("journal_head"), claim.get("state")
    if not isinstance(anchored, str) or not anchored:
        return ""
    latest = Anchor(anchored, claim_sha)
    anchors = ClaimAnchors(
        str(claim.get("brief", "")), (latest,), latest if state in SETTLED_STATES else None
    )
    problems = anchor_problems(line_hashes(entries), head, anchors, where="anchored head")
    return problems[0] if problems else ""


def anchored_branch_journal(forge: Forge, brief: str, into: Path) -> tuple[str, Journal]:
    """The journal at ``brief``'s checkpoint (the read model's ``checkpoint_tips``: its
    journal ref's tip; once merged, the run ref that kept it; for a run written before the
    journal ref, its branch's tip), checked against the claim's anchors.

    Materialised under ``into``; returns ``(tip, journal)``. ``Corrupt`` when the journal
    is edited, or rewritten, truncated or missing a segment past what the claim anchored.
    """
    from assay.evidence.source import journal_from_commit
    from assay.forgestate.snapshot import checkpoint_tips

    wanted = [refs.journal_ref(brief), refs.runs_of(brief), refs.branch_ref(brief)]
    found = forge.refresh([*wanted, refs.claim_ref(brief)])
    tip = checkpoint_tips(found).get(brief)
    if tip is None:
        raise BadInput(
            f"{wanted[2]}: no such branch (and no {wanted[0]}, no run under {wanted[1]}) on "
            f"the forge, so no journal for {brief!r}"
        )
    journal = journal_from_commit(forge, tip, brief, into)
    anchors = read_claim_anchors(forge, brief, found.get(refs.claim_ref(brief)))
    check_anchors(journal.entries, journal.head, anchors, where=f"{brief}: journal at {tip[:12]}")
    return tip, journal
