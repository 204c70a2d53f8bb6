"""The merge rule, as a pure function of the brief's rows and the evidence records.

A merge is allowed only when every acceptance row has a record that

- was written by the gate (a ``gate:`` verifier that is not the brief's desk) and signed by
  the gate's key (unless the gate runs ``--insecure-unsigned-evidence``) — a row the desk
  wrote itself, or a record hand-made to look like the gate's, never counts;
- is for the review's current head commit and for the row's current command;
- passed (exit 0, not timed out, and no finding from the runner's own result);
- carries the declared environment: the fingerprint the desk recorded, and one that
  satisfies the brief's ``env`` declaration;
- ran in the gate's sandbox, unless the merge explicitly accepts host runs
  (``--allow-unsandboxed-evidence``).

Anything else names the row and why: missing, failing, stale (verified at an older commit
or for an older command), env mismatch or unsandboxed. A brief that needs approval
(``Brief.needs_approval``) merges only when its latest answer on its events ref is an
``approve``, whatever kind of desk did the work: the rule checks it, not the desk.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import assay.refs as refs
from assay.evidence.claimed import Claimed
from assay.evidence.fingerprint import declaration_problems, diff_fingerprints
from assay.evidence.records import EvidenceRecord
from assay.evidence.spec import EnvDecl, RowSpec
from assay.runtime.types import Event

GATE_PREFIX = "gate:"


class Verdict(enum.Enum):
    PASS = "pass"
    FAILING = "failing"
    MISSING = "missing"
    STALE = "stale"
    ENV_MISMATCH = "env mismatch"
    UNSANDBOXED = "unsandboxed"


@dataclass(frozen=True)
class RowStatus:
    """One line of the claimed-versus-verified table."""

    row: str
    command: str
    claimed: str | None
    verified: str | None
    at: str | None
    verdict: Verdict
    reason: str = ""
    record: EvidenceRecord | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "command": self.command,
            "claimed": self.claimed,
            "verified": self.verified,
            "at": self.at,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "exit": None if self.record is None else self.record.exit,
            "seconds": None if self.record is None else self.record.seconds,
        }


@dataclass(frozen=True)
class MergeDecision:
    """Whether ``head_sha`` may merge, and each row's standing."""

    brief: str
    head_sha: str
    rows: list[RowStatus]
    problems: list[str] = field(default_factory=list)
    # The evidence ref's tip the records were read at (None: no log), for a reader that
    # checks it against what only the gate can write (the GitHub gate's check run).
    evidence_tip: str | None = None

    @property
    def allowed(self) -> bool:
        return not self.problems and all(s.verdict is Verdict.PASS for s in self.rows)

    def blocking(self) -> list[str]:
        """One readable line per reason the merge is refused."""
        lines = list(self.problems)
        for status in self.rows:
            if status.verdict is not Verdict.PASS:
                lines.append(f"row {status.row!r}: {status.verdict.value}: {status.reason}")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "brief": self.brief,
            "head_sha": self.head_sha,
            "allowed": self.allowed,
            "problems": self.problems,
            "rows": [status.to_json() for status in self.rows],
        }


def counts(
    record: EvidenceRecord,
    *,
    desk_names: Collection[str],
    require_signed: bool,
    key_known: bool = True,
) -> bool:
    """Whether a record may count at all: written and signed by the gate, not by the desk.

    ``key_known=False`` is a reader without the gate's key (the board, a desk rendering its
    review): it can only see that a record carries a signature, not check it; the merge
    itself always runs with the key.
    """
    if not record.verifier.startswith(GATE_PREFIX):
        return False
    name = record.verifier[len(GATE_PREFIX) :]
    if name in desk_names or record.verifier in desk_names:
        return False
    if not require_signed:
        return True
    return record.signed if key_known else bool(record.sig)


def describe(record: EvidenceRecord) -> str:
    if record.timed_out:
        said = f"timeout after {record.seconds:g}s"
    elif record.findings and record.exit == 0:
        said = f"fail ({record.findings[0]})"
    else:
        said = "pass" if record.passed else f"fail (exit {record.exit})"
    return said if record.sandboxed else f"{said}, unsandboxed"


def env_mismatch(
    record: EvidenceRecord, *, declared: Mapping[str, str] | None, env: EnvDecl
) -> list[str]:
    """Why ``record``'s environment is not the declared one (empty when it is)."""
    lines = declaration_problems(env, record.env_fingerprint)
    if declared is not None:
        lines += diff_fingerprints(declared, record.env_fingerprint)
    return lines


def decide(
    *,
    brief: str,
    rows: Sequence[RowSpec],
    records: Sequence[EvidenceRecord],
    head_sha: str,
    env: EnvDecl,
    claimed: Claimed | None = None,
    desk_names: Collection[str] = (),
    require_signed: bool = False,
    key_known: bool = True,
    allow_unsandboxed: bool = False,
    approval: Sequence[Event] | None = None,
) -> MergeDecision:
    """The merge rule. ``records`` are in ref order (oldest first); ``approval``: the
    brief's events, oldest first, when the brief needs approval (None: it does not)."""
    claim = claimed or Claimed()
    problems = _brief_problems(rows, env, claim)
    if approval is not None:
        problems += approval_problems(approval, brief=brief)
    statuses: list[RowStatus] = []
    for row in rows:
        mine = [
            r
            for r in records
            if r.row == row.id
            and r.brief == brief
            and counts(r, desk_names=desk_names, require_signed=require_signed, key_known=key_known)
        ]
        status = _row_status(row, mine, head_sha=head_sha, claim=claim, env=env)
        if (
            status.verdict is Verdict.PASS
            and status.record is not None
            and not status.record.sandboxed
            and not allow_unsandboxed
        ):
            status = dataclasses.replace(
                status,
                verdict=Verdict.UNSANDBOXED,
                reason="the gate ran it on the host (--insecure-unsandboxed-rows); "
                "only a merge with --allow-unsandboxed-evidence accepts that",
            )
        statuses.append(status)
    return MergeDecision(brief=brief, head_sha=head_sha, rows=statuses, problems=problems)


def approval_problems(events: Sequence[Event], *, brief: str) -> list[str]:
    """Why a brief that needs approval may not merge: its latest answer to ``approval``
    (an ``approve`` or ``reject`` event, oldest first in ``events``) must be an approve."""
    answers = [e for e in events if e.kind in ("approve", "reject") and e.satisfies("approval")]
    if not answers:
        return [
            f"the brief needs approval and {refs.events_ref(brief)} holds no approve event "
            f"(assay approve {brief})"
        ]
    last = answers[-1]
    if last.kind == "reject":
        by = f" by {last.actor}" if last.actor else ""
        return [f"the brief needs approval and its latest answer is a rejection{by}"]
    return []


def _brief_problems(rows: Sequence[RowSpec], env: EnvDecl, claim: Claimed) -> list[str]:
    """What blocks the merge whatever the records say."""
    problems: list[str] = []
    if not rows:
        problems.append("the brief declares no verify rows: nothing proves this change")
    if env.declared and claim.env_fingerprint is None:
        problems.append(
            "the desk recorded no environment fingerprint (an evidence.claimed step), "
            "so the brief's single environment cannot be checked"
        )
    return problems


def _row_status(
    row: RowSpec,
    mine: Sequence[EvidenceRecord],
    *,
    head_sha: str,
    claim: Claimed,
    env: EnvDecl,
) -> RowStatus:
    """One row's standing from the records that count for it (oldest first)."""
    claimed_row = claim.rows.get(row.id)
    said = claimed_row.result if claimed_row else None
    current = [r for r in mine if r.head_sha == head_sha and r.command == row.command]
    if current:
        latest = current[-1]
        verdict, reason = _current_verdict(latest, claim=claim, env=env)
    elif mine:
        latest = mine[-1]
        verdict, reason = Verdict.STALE, _stale_reason(latest, head_sha)
    else:
        return RowStatus(
            row.id, row.command, said, None, None, Verdict.MISSING, "no gate record for this row"
        )
    return RowStatus(
        row.id, row.command, said, describe(latest), latest.head_sha, verdict, reason, latest
    )


def _current_verdict(
    latest: EvidenceRecord, *, claim: Claimed, env: EnvDecl
) -> tuple[Verdict, str]:
    """The verdict on a record for the head and the row's current command."""
    if not latest.passed:
        if latest.findings:
            return Verdict.FAILING, "; ".join(latest.findings)
        return Verdict.FAILING, describe(latest)
    mismatch = env_mismatch(latest, declared=claim.env_fingerprint, env=env)
    if mismatch:
        return Verdict.ENV_MISMATCH, "; ".join(mismatch)
    return Verdict.PASS, ""


def _stale_reason(latest: EvidenceRecord, head_sha: str) -> str:
    if latest.head_sha != head_sha:
        return f"verified at {latest.head_sha[:12]}, the review's head is {head_sha[:12]}"
    return "verified for an older command than the brief's row"
