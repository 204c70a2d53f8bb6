"""Events, reviews, evidence, a sweep's batch and the read model, on both backends.

Each test takes ``backend`` and runs twice: on a real embedded forge and on ``MemoryForge``
(``tests.forge_fixtures.backend``). The logic above the records layer (the events log's
skipping, the review's one codec, the evidence chain and its re-chaining after a lost race,
a sweep's one atomic push, the board's rows from one snapshot) must not tell them apart.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import assay.refs as refs
from assay.claims import ClaimStore
from assay.desks.records.events import EventLog
from assay.desks.records.review import read_review, write_review
from assay.errors import Busy
from assay.evidence.records import EvidenceRecord
from assay.evidence.reviews import stage_version
from assay.evidence.store import append_records, fetch_log
from assay.forge.records import LostRace, Stage, WritePolicy, write
from assay.forgestate.rows import collect_snapshot
from assay.forgestate.status import status_codec
from assay.journal import JournalWriter
from assay.plumbing import Identity, RefUpdate
from tests.evidence.test_records import _record
from tests.gatekeys import key_for

WRITER = Identity("tester", "tester@example.invalid")
KEY = key_for("logic-backends")
BRIEF_TEXT = """---
id: b1
title: Add b1
verify:
  - id: unit
    run: python3 -c 'print(1)'
---
Do b1.
"""


def _commit_on(backend: Any, ref: str, files: dict[str, bytes], *, message: str) -> str:
    """``files`` as a new commit on ``ref``'s tip (a compare-and-swap push)."""
    tip = backend.refresh([ref]).get(ref)
    commit = backend.commit(files, parents=[tip] if tip else [], message=message, author=WRITER)
    assert backend.push([RefUpdate(ref, commit, expected=tip)]).ok
    return commit


def _evidence(row: str, *, exit: int = 0) -> EvidenceRecord:
    return dataclasses.replace(_record(row=row, exit=exit), brief="b1")


def test_events_are_read_in_order_and_a_bad_record_is_skipped_with_a_note(
    backend: Any,
) -> None:
    log = EventLog(backend, "b1")
    log.append("approve", actor="ann", event_id="e1")
    _commit_on(
        backend,
        refs.events_ref("b1"),
        {"record.json": b'{"v": 1, "kind": "events", "id": "e2", "event": "teleport"}'},
        message="by hand",
    )
    log.append("signal", actor="bob", event_id="e3", data={"name": "go"})
    events = EventLog(backend, "b1").read()
    assert [(e.id, e.kind) for e in events] == [("e1", "approve"), ("e3", "signal")]
    reader = EventLog(backend, "b1")
    reader.read()
    assert len(reader.skipped) == 1 and "field 'text'" in reader.skipped[0]


def test_a_review_version_staged_on_a_stale_tip_is_given_back(backend: Any) -> None:
    write_review(backend, "b1", head_sha="a" * 40, title="Add b1", body="one", state="draft")
    stale = read_review(backend, "b1")
    assert stale is not None
    write_review(backend, "b1", head_sha="b" * 40, title="Add b1", body="two", state="ready")

    def build(_again: bool) -> Stage:
        stage = Stage(backend)
        stage_version(stage, stale, message="table", body="stale table")
        return stage

    policy = WritePolicy(attempts=1, on_lost=lambda _r: LostRace.GIVE_BACK)
    assert not write(backend, build, policy=policy).ok
    current = read_review(backend, "b1")
    assert current is not None and (current.body, current.state) == ("two", "ready")


def test_evidence_appended_from_a_stale_log_is_chained_on_top(backend: Any) -> None:
    first = append_records(backend, "b1", [_evidence("unit")], key=KEY)
    append_records(backend, "b1", [_evidence("lint", exit=1)], key=KEY)
    # A gate that read the log before the second record lost the race and re-chains.
    append_records(backend, "b1", [_evidence("unit", exit=1)], key=KEY, log=first)
    log = fetch_log(backend, "b1", key=KEY.public)
    assert [(r.row, r.passed) for r in log.records] == [
        ("unit", True),
        ("lint", False),
        ("unit", False),
    ]
    assert [r.prev for r in log.records[1:]] == [r.digest for r in log.records[:-1]]
    assert all(r.signed for r in log.records)


def test_a_sweeps_claims_and_status_land_together_or_not_at_all(backend: Any) -> None:
    store = ClaimStore(backend)
    store.acquire("b1", "coder", lease_s=1)
    record = store.get("b1")
    assert record is not None
    status = refs.status_ref("b1")
    stale = backend.refresh([status]).get(status)
    _commit_on(backend, status, {"record.json": b'{"v": 1, "kind": "status"}'}, message="race")
    stage = Stage(backend)
    stage.record(
        status_codec("b1"),
        {"state": "stuck", "note": "n", "by": "s"},
        on=stale,
        author=WRITER,
        message="status",
    )
    sweeper = ClaimStore(backend, clock=lambda: datetime(2100, 1, 1, tzinfo=UTC))
    with pytest.raises(Busy, match="refs/assay/status/b1"):
        sweeper.mark_stuck_batch([(record, "silent")], by="sweeper", stage=stage)
    assert store.get("b1") == record  # the claim did not move without its status
    stage = Stage(backend)
    fresh = backend.refresh([status]).get(status)
    stage.record(
        status_codec("b1"),
        {"state": "stuck", "note": "n", "by": "s"},
        on=fresh,
        author=WRITER,
        message="status",
    )
    (stuck,) = sweeper.mark_stuck_batch([(record, "silent")], by="sweeper", stage=stage)
    assert store.get("b1") == stuck and stuck.state == "stuck"


def test_the_read_model_judges_the_same_rows_on_both(backend: Any, tmp_path: Path) -> None:
    _commit_on(backend, refs.MAIN, {"briefs/b1.md": BRIEF_TEXT.encode()}, message="brief")
    store = ClaimStore(backend)
    claim = store.acquire("b1", "coder", lease_s=600)
    journal_dir = tmp_path / "journal"
    writer = JournalWriter.open(journal_dir, run_id="run-1")
    writer.append({"kind": "start", "desk": "coder"})
    writer.append({"kind": "step", "step": "tool", "pos": 0, "status": "ok", "out": {}})
    writer.close()
    files = {
        f".assay/journal/b1/{path.name}": path.read_bytes()
        for path in journal_dir.iterdir()
        if path.is_file()
    }
    files["b1.py"] = b"print(1)\n"
    _commit_on(backend, refs.journal_ref("b1"), files, message="checkpoint")
    store.set_waiting(claim, "approval")
    EventLog(backend, "b1").append("approve", actor="ann", event_id="e1")
    write_review(backend, "b1", head_sha="a" * 40, title="Add b1", body="b", state="ready")
    snapshot, board = collect_snapshot(backend, now=datetime(2026, 1, 1, tzinfo=UTC))
    (row,) = board.rows
    assert (row.id, row.state, row.desk, row.steps) == ("b1", "waiting", "coder", 1)
    assert row.review == "refs/assay/reviews/b1 (ready)"
    assert [e.id for e in snapshot.events["b1"]] == ["e1"]
    assert (
        snapshot.checkpoint("b1")
        == backend.refresh([refs.journal_ref("b1")])[refs.journal_ref("b1")]
    )
    assert not snapshot.invalid
