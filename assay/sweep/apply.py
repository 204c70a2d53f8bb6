"""Carrying out a sweep's plan in a constant number of pushes, whatever the number of briefs.

Marking 150 claims stuck one push at a time costs 150 round trips (and each push of a
cache holding thousands of refs is slow). Instead every claim update of a sweep goes in
**one** non-atomic push, each ref with its own compare-and-swap lease: a claim a desk renewed
meanwhile loses its lease check alone (reported ``skipped``) and the others land. The status
records of the actions that landed go in a second push, each chained on the status tip the
sweep read (a lost race there falls back to ``RefLog.append``, which re-reads and retries).

The claim commit is ``ClaimStore.stuck_update``'s, the one ``mark_stuck`` pushes:
``ClaimRecord.evolve(state="stuck", note=...)`` as ``claim.json``, parent the record's
commit, authored by the sweeper.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import assay.refs as refs
from assay.board.model import iso
from assay.board.snapshot import ForgeSnapshot
from assay.sweep.plan import Action

STATUS_PREFIX = refs.STATUS


@dataclass
class Applied:
    """Outcome per action (same order as the plan) and the pushes it took."""

    outcomes: list[str] = field(default_factory=list)
    pushes: int = 0
    landed: list[bool] = field(default_factory=list)


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


def _encode(record: Mapping[str, Any]) -> bytes:
    # RefLog's own encoding of a record (sorted keys, compact), so RefLog reads it back.
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def apply_plan(
    forge: Any,
    snapshot: ForgeSnapshot,
    actions: list[Action],
    *,
    by: str,
    at: Any,
    sweep: str,
    author: Any,
) -> Applied:
    """Claim updates and ref deletions in one push, then status records in a second."""
    applied = Applied(outcomes=["done"] * len(actions), landed=[True] * len(actions))
    _push_refs(forge, actions, applied, by=by, author=author)
    _push_statuses(forge, snapshot, actions, applied, by=by, at=at, sweep=sweep, author=author)
    return applied


def _push_refs(
    forge: Any, actions: list[Action], applied: Applied, *, by: str, author: Any
) -> None:
    """Every stuck claim and deleted ref of the plan in one non-atomic push."""
    from assay.claims import ClaimStore
    from assay.plumbing import RefUpdate

    store = ClaimStore(forge)
    first: dict[str, tuple[int, Any]] = {}  # ref -> (action index, RefUpdate)
    for index, action in enumerate(actions):
        if action.action == "mark-stuck":
            record = action.claim.record if action.claim else None
            if record is None:
                applied.outcomes[index] = "skipped: the claim record could not be read"
                applied.landed[index] = False
                continue
            update = store.stuck_update(record, by=by, note=action.note, author=author)
            first[record.ref] = (index, update)
        elif action.action == "delete-ref":
            sha = str(action.detail.get("sha", ""))
            first[action.ref] = (index, RefUpdate(action.ref, None, expected=sha or None))
        elif action.action == "report-orphan":
            applied.outcomes[index] = "reported"
    if not first:
        return
    result = forge.push([update for _, update in first.values()], atomic=False)
    applied.pushes += 1
    for ref, (index, update) in first.items():
        outcome = result.refs.get(ref, result.outcome)
        if not outcome.ok:
            applied.landed[index] = False
            applied.outcomes[index] = (
                "skipped: the ref changed since the sweep read it"
                if outcome.lost
                else f"refused: {outcome.value}"
            )
        elif update.new is None:
            applied.outcomes[index] = "deleted"


def _push_statuses(
    forge: Any,
    snapshot: ForgeSnapshot,
    actions: list[Action],
    applied: Applied,
    *,
    by: str,
    at: Any,
    sweep: str,
    author: Any,
) -> None:
    """The status records of the actions that landed, chained per brief, in one push."""
    from assay.forge.records import RECORD_PATH, RefLog
    from assay.plumbing import RefUpdate

    stamp = iso(at)
    tips: dict[str, str | None] = {}
    second: dict[str, list[tuple[int, Any, dict[str, Any]]]] = {}
    for index, action in enumerate(actions):
        if action.status is None or not applied.landed[index]:
            continue
        ref = STATUS_PREFIX + action.brief
        record = status_record(action, by=by, at=stamp, sweep=sweep)
        parent = tips.get(ref, snapshot.refs.get(ref))
        commit = forge.commit(
            {RECORD_PATH: _encode(record)},
            parents=[parent] if parent else [],
            message=f"status {action.brief}: {record['state']} ({by})",
            author=author,
        )
        tips[ref] = commit
        second.setdefault(ref, []).append((index, (commit, snapshot.refs.get(ref)), record))
    if not second:
        return
    updates = [
        RefUpdate(ref, entries[-1][1][0], expected=entries[0][1][1])
        for ref, entries in second.items()
    ]
    result = forge.push(updates, atomic=False)
    applied.pushes += 1
    for ref, entries in second.items():
        if result.refs.get(ref, result.outcome).ok:
            continue
        # Someone else wrote this status meanwhile: append on top of theirs instead.
        log = RefLog(forge, ref, kind="status")
        for _, _, record in entries:
            body = {k: v for k, v in record.items() if k not in ("v", "kind")}
            log.append(body, author=author, message=f"status {record['brief']}")
            applied.pushes += 2
