"""Carrying out a sweep's plan in ONE atomic push, whatever the number of briefs.

Every write of a sweep goes in one push: the claims it marks stuck (``ClaimStore.
mark_stuck_batch``, each with its compare-and-swap on the claim the sweep read), the refs it
deletes, one status record per acting brief (chained on the status tip the sweep read), the
orphans record and the sweep's own log entry. The push is atomic: a SIGKILL at any instant
leaves either all of it on the forge or none of it, so no claim is ever marked stuck
without its status and log entry (the next sweep plans again what did not land). A ref that
moved since the snapshot (a desk renewed its claim) makes the whole push lose; the engine
then reads again and re-plans, which drops the claim that is live now.

The claim commit is the one ``ClaimStore.stage_stuck`` stages: ``ClaimRecord.evolve(state=
"stuck", note=...)`` as ``claim.json``, parent the record's commit, authored by the sweeper.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import assay.refs as refs
from assay.errors import BadInput, Corrupt
from assay.forge.records import RecordCodec, RefLog, Stage
from assay.forgestate.snapshot import ForgeSnapshot
from assay.forgestate.status import status_codec
from assay.forgestate.times import iso
from assay.sweep.plan import Action

STATUS_PREFIX = refs.STATUS


@dataclass
class Applied:
    """Outcome per action (same order as the plan) and the pushes it took."""

    outcomes: list[str] = field(default_factory=list)
    pushes: int = 0
    landed: list[bool] = field(default_factory=list)
    log_commit: str = ""


def status_record(action: Action, *, by: str, at: str, sweep: str) -> dict[str, Any]:
    assert action.status is not None
    return {
        **action.status,
        "brief": action.brief,
        "by": by,
        "at": at,
        "sweep": sweep,
        "v": 1,
        "kind": "status",
    }


# The sweep's own logs: one record per sweep, and the refs reported as orphans so far.
SWEEP_LOG_CODEC = RecordCodec(refs.SWEEP_LOG, "sweep", validate=lambda r: _sweep_record(r))
ORPHANS_CODEC = RecordCodec(
    refs.ORPHAN_LOG,
    "orphans",
    validate=lambda record: _strings(record, "refs"),
)


def _sweep_record(record: Mapping[str, Any]) -> None:
    for name in ("sweep", "by", "at"):
        if not isinstance(record.get(name), str):
            raise BadInput(f"field {name!r} must be a string")
    actions = record.get("actions")
    if not isinstance(actions, list) or not all(isinstance(a, dict) for a in actions):
        raise BadInput("field 'actions' must be a list of objects")


def _strings(record: Mapping[str, Any], name: str) -> None:
    value = record.get(name)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadInput(f"field {name!r} must be a list of strings")


def _codec(ref: str) -> RecordCodec:
    if ref == refs.SWEEP_LOG:
        return SWEEP_LOG_CODEC
    if ref == refs.ORPHAN_LOG:
        return ORPHANS_CODEC
    return status_codec(refs.brief_of(ref, STATUS_PREFIX))


@dataclass
class _Batch:
    stuck: list[tuple[Any, str]] = field(default_factory=list)  # (ClaimRecord, note)
    deletions: list[Any] = field(default_factory=list)  # RefUpdate (a ref removed)


def reported_orphans(forge: Any, tip: str | None) -> frozenset[str]:
    """The refs the orphans record at ``tip`` lists (none when there is none, or when it
    does not decode: they are reported again, which is harmless)."""
    if not tip:
        return frozenset()
    try:
        record = RefLog.of(forge, ORPHANS_CODEC).assume(tip).latest(fetch=False)
    except Corrupt:
        return frozenset()
    return frozenset(record["refs"]) if record else frozenset()


def planned_outcomes(actions: list[Action], dispatched: Mapping[int, str]) -> list[str]:
    """What each action's outcome is once the sweep's one push lands."""
    outcomes: list[str] = []
    for index, action in enumerate(actions):
        if action.action == "mark-stuck" and (action.claim is None or action.claim.record is None):
            outcomes.append("skipped: the claim record could not be read")
        elif action.action == "delete-ref":
            outcomes.append("deleted")
        elif action.action == "report-orphan":
            outcomes.append("reported")
        else:
            outcomes.append(dispatched.get(index, "done"))
    return outcomes


def _claims_and_deletions(actions: list[Action], landed: list[bool]) -> _Batch:
    """The claims to mark stuck (those whose action will land) and the refs to delete."""
    from assay.plumbing import RefUpdate

    batch = _Batch()
    for index, action in enumerate(actions):
        if action.action == "mark-stuck" and landed[index]:
            assert action.claim is not None
            batch.stuck.append((action.claim.record, action.note))
        elif action.action == "delete-ref":
            sha = str(action.detail.get("sha", ""))
            batch.deletions.append(RefUpdate(action.ref, None, expected=sha or None))
    return batch


def apply_plan(
    forge: Any,
    snapshot: ForgeSnapshot,
    actions: list[Action],
    *,
    by: str,
    at: Any,
    sweep: str,
    author: Any,
    outcomes: list[str],
    records: Mapping[str, Mapping[str, Any]],
) -> Applied:
    """Everything in one atomic push; ``Busy`` (nothing written) when a ref moved.

    ``outcomes`` are the actions' outcomes as they will stand once the push lands (known
    beforehand: the push is all or nothing); ``records`` are log records to append, by
    ref (the sweep log entry, the orphans record), each chained on the snapshot's tip.
    """
    from assay.claims.store import ClaimStore

    applied = Applied(
        outcomes=list(outcomes), landed=[not o.startswith("skipped") for o in outcomes]
    )
    batch = _claims_and_deletions(actions, applied.landed)
    stamp = iso(at)
    stage = Stage(forge)
    for deletion in batch.deletions:
        stage.add(deletion)
    # Each record chained on its log's tip as the snapshot read it (or on the one this
    # sweep staged there), checked and encoded by the log's own codec.
    for index, action in enumerate(actions):
        if action.status is None or not applied.landed[index]:
            continue
        record = status_record(action, by=by, at=stamp, sweep=sweep)
        ref = STATUS_PREFIX + action.brief
        stage.record(
            _codec(ref),
            record,
            on=snapshot.refs.get(ref),
            author=author,
            message=f"status {action.brief}: {record['state']} ({by})",
        )
    for ref, log_record in records.items():
        stage.record(
            _codec(ref),
            dict(log_record),
            on=snapshot.refs.get(ref),
            author=author,
            message=f"{log_record['kind']} {sweep} ({by})",
        )
    ClaimStore(forge).mark_stuck_batch(batch.stuck, by=by, stage=stage, require_expired=False)
    applied.pushes += 1
    applied.log_commit = next((tip for ref in records if (tip := stage.tip(ref))), "")
    return applied
