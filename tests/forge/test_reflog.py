"""RefLog: append-only versioned records on a ref, validated on every read."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from assay.errors import BadInput, Corrupt
from assay.forge import Forge, RefLog, open_forge
from assay.plumbing import Identity, RefUpdate

ME = Identity("gate", "gate@assay.invalid")


def _require_type(record: dict[str, Any]) -> None:
    if not isinstance(record.get("type"), str):
        raise ValueError("field 'type' must be a string")


def test_append_and_read_in_order(forge: Forge) -> None:
    log = RefLog.for_brief(forge, "events", "b1", validate=_require_type)
    assert log.read() == [] and log.head() is None and log.latest() is None
    first = log.append({"type": "approve", "actor": "ana"}, author=ME)
    log.append({"type": "signal", "text": "go"}, author=ME)
    records = log.read()
    assert [r["type"] for r in records] == ["approve", "signal"]
    assert all(r["v"] == 1 and r["kind"] == "events" for r in records)
    assert [e.record["type"] for e in log.entries(after=first.commit)] == ["signal"]
    assert log.latest() == records[-1]
    other = RefLog(forge, "refs/assay/events/b1", kind="events")
    assert other.read() == records


def test_concurrent_appenders_lose_no_record(forge_path: Path) -> None:
    def appender(name: str) -> None:
        with open_forge(str(forge_path)) as forge:
            log = RefLog.for_brief(forge, "evidence", "b1")
            for i in range(5):
                log.append({"who": name, "i": i}, author=ME)

    threads = [threading.Thread(target=appender, args=(f"t{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    with open_forge(str(forge_path)) as forge:
        records = RefLog.for_brief(forge, "evidence", "b1").read()
    assert sorted((r["who"], r["i"]) for r in records) == sorted(
        (f"t{n}", i) for n in range(3) for i in range(5)
    )


def _force_record(forge: Forge, ref: str, blob: bytes, parent: str | None) -> str:
    commit = forge.commit(
        {"record.json": blob}, parents=[parent] if parent else [], message="x", author=ME
    )
    assert forge.push([RefUpdate(ref, commit, expected=parent)]).ok
    return commit


@pytest.mark.parametrize(
    ("blob", "words"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "JSON object"),
        (json.dumps({"v": 2, "kind": "events", "type": "x"}).encode(), "'v'"),
        (json.dumps({"v": 1, "kind": "reviews", "type": "x"}).encode(), "'kind'"),
        (json.dumps({"v": 1, "kind": "events", "type": 5}).encode(), "type"),
    ],
)
def test_a_bad_record_is_corrupt_naming_ref_and_commit(
    forge: Forge, blob: bytes, words: str
) -> None:
    log = RefLog.for_brief(forge, "events", "b1", validate=_require_type)
    good = log.append({"type": "ok"}, author=ME)
    bad = _force_record(forge, log.ref, blob, good.commit)
    with pytest.raises(Corrupt, match=words) as raised:
        log.read()
    assert "refs/assay/events/b1" in raised.value.message and bad[:12] in raised.value.message
    assert raised.value.code == 6


def test_an_invalid_append_writes_nothing(forge: Forge) -> None:
    log = RefLog.for_brief(forge, "events", "b1", validate=_require_type)
    with pytest.raises(BadInput, match="type"):
        log.append({"type": 1}, author=ME)
    with pytest.raises(BadInput):
        log.append({"type": "x", "bad": object()}, author=ME)
    assert forge.ls_refs("refs/assay/") == {}


def test_brief_logs_check_the_brief_id(forge: Forge) -> None:
    with pytest.raises(BadInput):
        RefLog.for_brief(forge, "events", "../escape")
    with pytest.raises(BadInput):
        RefLog.for_brief(forge, "gossip", "b1")  # type: ignore[arg-type]
