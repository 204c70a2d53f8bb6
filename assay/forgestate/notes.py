"""Why a brief is where it is: the note of its board row and of ``assay status``.

A row's note is, in this order: why a record of the brief failed validation; else the
status record a sweeper wrote, while it still describes the brief (a ``stuck … released
for resume`` written before the run was resumed and merged does not; an event such as
``woken: approve by ann`` says how the brief got where it is, and stays); else what the claim
record says (a desk gives a brief back with the reason: ``diverged: call 3 …``); else a
sentence drawn from the state itself, for each state whose name alone does not say why
(released, stuck, expired, waiting, paused, closed, refused, cancelled, orphan). A held,
queued, in-review or merged brief needs none: its desk, its absent claim, its evidence
and its review say it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from assay.forgestate.briefs import EvidenceCounts
from assay.forgestate.snapshot import ClaimInfo, ForgeSnapshot
from assay.forgestate.times import iso
from assay.states import CONDITION_WORDS, State


def status_note_current(status: Mapping[str, Any], state: State, fence: int) -> bool:
    """Whether a sweeper's status record still describes a brief now in ``state`` at
    ``fence``: it names an event (``woken``: how the brief got here), or this state, or a
    condition of a run that has not ended and that no later holder has taken since."""
    said = str(status.get("state", ""))
    if said == state.value or said not in CONDITION_WORDS:
        return True
    if state.finished:
        return False
    recorded = status.get("fence")
    return not (isinstance(recorded, int) and recorded < fence)


def why(
    snapshot: ForgeSnapshot,
    brief: str,
    state: State,
    *,
    as_of: datetime,
    evidence: EvidenceCounts,
    fence: int,
) -> str:
    """The note of ``brief``'s row (module docstring); "" only when the state says it all."""
    invalid = snapshot.invalid_reason(brief)
    if invalid:
        return invalid
    status = snapshot.statuses.get(brief, {})
    note = str(status.get("note", ""))
    if note and status_note_current(status, state, fence):
        return note
    claim = snapshot.claims.get(brief)
    said = claim.record.note if claim is not None and claim.record is not None else ""
    if said and state in _CLAIM_SAYS:
        return str(said)
    return _from_state(snapshot, brief, state, claim, as_of=as_of, evidence=evidence)


# States whose claim record's note (written by the desk or the sweeper that moved it
# there) says why: a desk's release reason, a sweeper's stuck mark, a closing run's error.
_CLAIM_SAYS = frozenset({State.RELEASED, State.STUCK, State.CLOSED, State.EXPIRED})


def _from_state(
    snapshot: ForgeSnapshot,
    brief: str,
    state: State,
    claim: ClaimInfo | None,
    *,
    as_of: datetime,
    evidence: EvidenceCounts,
) -> str:
    holder = f"{claim.holder} (desk {claim.desk}, fence {claim.fence})" if claim else ""
    # A release, a stuck mark and a wait each set the claim's renewal time to their own.
    since = f" at {iso(claim.renewed_at)}" if claim and claim.renewed_at else ""
    journal = snapshot.journals.get(brief)
    if state is State.RELEASED:
        return f"released by {holder}{since}; any desk may resume it"
    if state is State.STUCK:
        return f"a sweeper found {holder} silent past its lease; released for resume"
    if state is State.EXPIRED and claim is not None:
        renewed = f", last renewed {iso(claim.renewed_at)}" if claim.renewed_at else ""
        return f"lease of {holder} ran out{renewed}; no sweeper has released it yet"
    if state is State.WAITING:
        waiting = (claim.waiting_for if claim else "") or (journal.waiting_for if journal else "")
        until = journal.wait_until if journal is not None else None
        return f"waiting for {waiting or 'an event'}" + (f" until {iso(until)}" if until else "")
    if state is State.PAUSED:
        return "paused: its budget is spent; raising it on main resumes the run"
    if state is State.CLOSED:
        return "finished without an open review"
    if state is State.REFUSED:
        return f"the gate ran {evidence.failing} row(s) at the review's head and they failed"
    if state is State.CANCELLED:
        actors = [e.actor for e in snapshot.events.get(brief, ()) if e.kind == "cancel"]
        return "cancelled" + (f" by {actors[-1]}" if actors and actors[-1] else "")
    if state is State.ORPHAN:
        return "a claim for a brief that is not on main"
    return ""


__all__ = ["status_note_current", "why"]
