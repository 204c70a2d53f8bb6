"""Property tests: random step sequences round-trip; any single changed byte is detected."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.errors import AssayError
from assay.journal import JournalWriter, read_journal

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

steps = st.lists(
    st.tuples(
        st.sampled_from(["compute", "model", "tool", "effect"]),
        st.text(min_size=1, max_size=12),
        json_values,
        st.booleans(),  # store the output as a blob
    ),
    min_size=1,
    max_size=12,
)


def _write(directory: Path, sequence: list[tuple[str, str, Any, bool]]) -> list[dict[str, Any]]:
    written = []
    with JournalWriter.open(directory, run_id="prop") as writer:
        for pos, (kind, name, value, as_blob) in enumerate(sequence, start=1):
            entry: dict[str, Any] = {
                "kind": "step",
                "pos": pos,
                "step": kind,
                "name": name,
                "status": "ok",
            }
            if as_blob:
                ref = writer.put_blob({"payload": value, "pos": pos})
                entry.update(out={"blob": ref}, blobs=[ref])
            else:
                entry["out"] = {"value": value}
            written.append(writer.append(entry))
    return written


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_random_step_sequences_round_trip(sequence: list[tuple[str, str, Any, bool]]) -> None:
    directory = Path(tempfile.mkdtemp())
    try:
        written = _write(directory, sequence)
        journal = read_journal(directory)
        assert journal.entries == written
        for entry, (_, _, value, as_blob) in zip(journal.entries, sequence, strict=True):
            if as_blob:
                assert journal.load(entry["out"]["blob"])["payload"] == value
            else:
                assert entry["out"]["value"] == value
    finally:
        shutil.rmtree(directory)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.data())
def test_any_single_byte_change_is_detected(
    sequence: list[tuple[str, str, Any, bool]], data: st.DataObject
) -> None:
    directory = Path(tempfile.mkdtemp())
    try:
        _write(directory, sequence)
        files = sorted(p for p in directory.rglob("*") if p.is_file() and p.stat().st_size)
        target = data.draw(st.sampled_from(files), label="file")
        raw = bytearray(target.read_bytes())
        index = data.draw(st.integers(0, len(raw) - 1), label="index")
        value = data.draw(st.integers(0, 255).filter(lambda b: b != raw[index]), label="byte")
        raw[index] = value
        target.write_bytes(bytes(raw))
        is_final_newline = target.suffix == ".jsonl" and index == len(raw) - 1
        try:
            journal = read_journal(directory)
        except AssayError as error:
            assert error.code == 6, error.message
            return
        # The one change a reader may recover from: the last line's terminating newline,
        # which makes that line indistinguishable from a torn append; it is dropped and
        # reported, never replayed.
        assert is_final_newline, f"undetected change at {target.name}[{index}]"
        assert journal.torn_line_dropped and len(journal.entries) == len(sequence) - 1
    finally:
        shutil.rmtree(directory)
