"""Typed journal entries: every line the runtime writes decodes to one record that encodes
back to the same line, and every view of a journal is a view of one fold."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from assay.errors import Corrupt
from assay.evidence.claimed import claimed_from_entries
from assay.forgestate.snapshot import journal_info
from assay.journal import KINDS, read_journal, summarize
from assay.journal import entries as e
from assay.journal.fold import fold
from assay.runtime.history import History
from tests.conftest import REPO_ROOT
from tests.journal.test_schema import _all_entries

ENVELOPE = {"v", "seq", "prev", "run", "fence", "sum"}


def test_every_written_line_round_trips_through_its_typed_record(tmp_path: Path) -> None:
    lines = _all_entries(tmp_path)
    seen: set[type[e.Entry]] = set()
    for line in lines:
        record = e.decode(line)
        assert record == dataclasses.replace(record)  # the record its __init__ would make
        seen.add(type(record))
        assert record.kind == line["kind"] and record.seq == line["seq"]
        assert record.fence == line["fence"]
        body = {k: v for k, v in line.items() if k not in ENVELOPE}
        encoded = {k: v for k, v in record.to_json().items() if k != "fence"}
        assert encoded == body, line["kind"]
    assert {kind.KIND for kind in e.KINDS} == KINDS
    assert seen == set(e.KINDS)  # the runtime writes every kind, intent and result both


def test_an_unknown_kind_is_corrupt_not_guessed() -> None:
    with pytest.raises(Corrupt, match="unknown entry kind 'teleport'"):
        e.decode({"kind": "teleport", "seq": 4})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"kind": "step", "status": "ok", "pos": "3"}, "field pos is a string, expected an int"),
        ({"kind": "wait", "pos": 2, "for": ["x"]}, "field for is an array, expected a string"),
        ({"kind": "step", "status": "started", "pos": 1}, "field step is missing"),
        ({"kind": "step", "status": "ok", "ms": True}, "field ms is a boolean, expected an int"),
        ({"kind": "wake", "event": "e1"}, "field event is a string, expected an object or null"),
        ({"kind": "step", "status": "ok", "tools": [1]}, "an item of field tools is an integer"),
        ({"kind": "start", "blobs": [None]}, "an item of field blobs is null, expected a string"),
        ({"kind": "signal", "events": {}}, "field events is an object, expected an array"),
    ],
)
def test_a_field_of_the_wrong_type_is_corrupt_naming_it(
    line: dict[str, object], message: str
) -> None:
    """A line that passes its checksum was not changed after it was written; whoever wrote
    it (a desk writing its own branch) may still have written anything."""
    with pytest.raises(Corrupt, match=f"journal line 7 \\({line['kind']}\\): {message}"):
        e.decode({**line, "seq": 7})


def test_every_field_type_has_a_json_reading() -> None:
    """A new field's annotation must map to JSON types, or decoding it would guess."""
    for record in e.KINDS:
        e.decode({"kind": record.KIND, "status": next(iter(record.STATUS), ""), "step": "tool"})


def test_the_views_agree_because_they_read_one_fold(tmp_path: Path) -> None:
    lines = _all_entries(tmp_path)
    facts = fold(lines)
    info = journal_info(lines)
    history = History.build(lines)
    assert (info.steps, info.model_calls, info.last_step) == (
        facts.totals.steps,
        facts.totals.model_calls,
        facts.last_step,
    )
    assert history.consumed == facts.consumed and info.consumed_events == facts.consumed
    assert set(history.positions) == set(facts.positions)
    golden = read_journal(REPO_ROOT / "tests" / "runtime" / "golden" / "approved")
    summary = summarize(golden)
    golden_info = journal_info(golden.entries)
    assert summary.last_step == golden_info.last_step != ""
    assert summary.steps == golden_info.steps and summary.model_calls == golden_info.model_calls
    assert claimed_from_entries(lines).rows == {}


def test_the_runtime_writes_no_entry_as_a_dict_literal() -> None:
    """Entries are written only through assay.journal.entries' typed records."""
    for path in ("assay/runtime/run.py", "assay/runtime/execute.py"):
        tree = ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                assert "kind" not in keys, f"{path}:{node.lineno} spells an entry as a dict"
