"""The journal writer and reader: chain, checksums, torn lines, damage, versions, segments."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.errors import BadInput, Corrupt
from assay.journal import (
    FORMAT_VERSION,
    JournalVersionError,
    JournalWriter,
    read_journal,
    summarize,
)
from assay.journal.blobs import blob_path
from assay.journal.format import encode_line
from tests.journal.helpers import flip, write_entries


def _steps(n: int) -> list[dict[str, object]]:
    return [
        {
            "kind": "step",
            "pos": i,
            "step": "compute",
            "name": f"s{i}",
            "status": "ok",
            "out": {"value": i},
        }
        for i in range(1, n + 1)
    ]


def test_entries_round_trip_with_seq_prev_and_version(tmp_path: Path) -> None:
    lines = write_entries(tmp_path, _steps(5))
    journal = read_journal(tmp_path)
    assert journal.entries == lines
    assert [e["seq"] for e in journal.entries] == [1, 2, 3, 4, 5]
    assert journal.entries[0]["prev"] == ""
    for before, after in zip(journal.entries, journal.entries[1:], strict=False):
        assert after["prev"] == before["sum"]
    assert {e["v"] for e in journal.entries} == {FORMAT_VERSION}
    assert journal.head == lines[-1]["sum"]
    assert journal.run_id == "run-test"
    assert not journal.torn_line_dropped


def test_reopening_continues_the_chain(tmp_path: Path) -> None:
    write_entries(tmp_path, _steps(2))
    with JournalWriter.open(tmp_path) as writer:
        line = writer.append({"kind": "end", "status": "ok"})
    journal = read_journal(tmp_path)
    assert line["seq"] == 3 and line["prev"] == journal.entries[1]["sum"]
    assert line["run"] == "run-test"


def test_torn_last_line_is_dropped_reported_and_cut_by_the_writer(tmp_path: Path) -> None:
    write_entries(tmp_path, _steps(3))
    segment = tmp_path / "000001.jsonl"
    whole = segment.read_bytes()
    raw, _ = encode_line({"kind": "end", "v": 1})
    segment.write_bytes(whole + raw[: len(raw) // 2])  # a crash in the middle of an append
    journal = read_journal(tmp_path)
    assert len(journal.entries) == 3
    assert journal.torn is not None
    assert (journal.torn.segment, journal.torn.line) == ("000001.jsonl", 4)
    with JournalWriter.open(tmp_path) as writer:
        writer.append({"kind": "end", "status": "ok"})
    assert segment.read_bytes().startswith(whole)  # no complete line lost or rewritten
    again = read_journal(tmp_path)
    assert not again.torn_line_dropped
    assert [e["kind"] for e in again.entries][-1] == "end" and len(again.entries) == 4


def test_edited_output_is_corrupt_naming_segment_and_line(tmp_path: Path) -> None:
    write_entries(tmp_path, _steps(4))
    segment = tmp_path / "000001.jsonl"
    lines = segment.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"value":3', '"value":4')
    segment.write_text("".join(lines))
    with pytest.raises(Corrupt, match=r"000001\.jsonl line 3: checksum mismatch") as info:
        read_journal(tmp_path)
    assert info.value.code == 6


def test_edited_line_with_recomputed_sum_breaks_the_chain(tmp_path: Path) -> None:
    written = write_entries(tmp_path, _steps(4))
    segment = tmp_path / "000001.jsonl"
    lines = segment.read_text().splitlines(keepends=True)
    forged = {k: v for k, v in written[1].items() if k != "sum"}
    forged["out"] = {"value": 99}
    raw, _ = encode_line(forged)
    lines[1] = raw.decode() + "\n"
    segment.write_text("".join(lines))
    with pytest.raises(Corrupt, match=r"line 3: prev does not match"):
        read_journal(tmp_path)


def test_missing_line_is_corrupt(tmp_path: Path) -> None:
    write_entries(tmp_path, _steps(4))
    segment = tmp_path / "000001.jsonl"
    lines = segment.read_text().splitlines(keepends=True)
    del lines[1]
    segment.write_text("".join(lines))
    with pytest.raises(Corrupt, match=r"000001\.jsonl line 2: seq is 3, expected 2"):
        read_journal(tmp_path)


def test_changed_and_missing_blobs_are_corrupt(tmp_path: Path) -> None:
    with JournalWriter.open(tmp_path) as writer:
        ref = writer.put_blob({"big": "x" * 5000})
        writer.append(
            {"kind": "step", "pos": 1, "status": "ok", "out": {"blob": ref}, "blobs": [ref]}
        )
    blob = blob_path(tmp_path, ref)
    assert read_journal(tmp_path).load(ref) == {"big": "x" * 5000}
    flip(blob, 10, ord("y"))
    with pytest.raises(Corrupt, match="does not match its hash"):
        read_journal(tmp_path)
    blob.unlink()
    with pytest.raises(Corrupt, match=r"000001\.jsonl line 1: blob sha256:[0-9a-f]+ is missing"):
        read_journal(tmp_path)


def test_a_newer_format_version_is_refused_with_a_typed_error(tmp_path: Path) -> None:
    raw, _ = encode_line(
        {"v": FORMAT_VERSION + 1, "seq": 1, "prev": "", "kind": "start", "run": "r"}
    )
    (tmp_path / "000001.jsonl").write_bytes(raw + b"\n")
    with pytest.raises(
        JournalVersionError, match=r"line 1: journal format version 2 is newer"
    ) as info:
        read_journal(tmp_path)
    assert isinstance(info.value, BadInput) and info.value.code == 65


def test_segments_roll_with_a_continue_snapshot_and_stay_verifiable(tmp_path: Path) -> None:
    with JournalWriter.open(tmp_path, run_id="r", segment_bytes=600) as writer:
        writer.append({"kind": "checkpoint", "pos": 1, "out": {"value": {"turn": 1}}})
        for entry in _steps(12):
            writer.append(entry)
    journal = read_journal(tmp_path)
    assert len(journal.segments) > 2
    continues = [e for e in journal.entries if e["kind"] == "continue"]
    assert len(continues) == len(journal.segments) - 1
    assert continues[0]["snapshot"] == {"value": {"turn": 1}}
    assert [e["seq"] for e in journal.entries] == list(range(1, len(journal.entries) + 1))
    # reopening appends to the last segment and keeps the chain across files
    with JournalWriter.open(tmp_path, segment_bytes=600) as writer:
        writer.append({"kind": "end", "status": "ok"})
    assert read_journal(tmp_path).entries[-1]["kind"] == "end"
    # a closed segment that lost its last line (the continue) is corrupt
    first = tmp_path / journal.segments[0]
    first.write_text("".join(first.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(Corrupt):
        read_journal(tmp_path)


def _fill_to_a_roll(writer: JournalWriter) -> None:
    """Append steps until the writer rolls, and nothing after the roll."""
    for pos in range(1, 100):
        writer.append({"kind": "step", "pos": pos, "label": f"s{pos}", "status": "ok"})
        if read_journal(writer.directory).entries[-1]["kind"] == "continue":
            return
    raise AssertionError("the writer never rolled")


@pytest.mark.parametrize("left", ["no next segment", "an empty next segment"])
def test_a_journal_reopened_right_after_a_roll_keeps_one_chain(tmp_path: Path, left: str) -> None:
    """A run whose last line rolled the segment (a wait, then a suspend), reopened on its
    wake. The next segment is created with its first line; an empty one (a writer killed
    between creating it and writing) is written into, not skipped."""
    with JournalWriter.open(tmp_path, run_id="r", segment_bytes=400) as writer:
        _fill_to_a_roll(writer)
    assert [p.name for p in sorted(tmp_path.glob("*.jsonl"))] == ["000001.jsonl"]
    if left == "an empty next segment":
        (tmp_path / "000002.jsonl").write_bytes(b"")
    with JournalWriter.open(tmp_path, segment_bytes=400) as writer:
        writer.append({"kind": "end", "status": "ok"})
    journal = read_journal(tmp_path)
    assert journal.segments == ["000001.jsonl", "000002.jsonl"]
    assert journal.entries[-1]["kind"] == "end"


def test_secret_values_never_reach_a_line_or_blob(tmp_path: Path) -> None:
    secret = "tok-5f2c9e7a81"
    with JournalWriter.open(tmp_path, secrets=[secret]) as writer:
        ref = writer.put_blob({"message": f"the token is {secret}", "pad": "p" * 4000})
        raw_ref = writer.put_blob(f"raw {secret} bytes".encode())
        writer.append(
            {
                "kind": "step",
                "pos": 1,
                "status": "ok",
                "out": {"value": {secret: [f"x{secret}y", 3]}},
                "blobs": [ref, raw_ref],
            }
        )
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    journal = read_journal(tmp_path)
    assert journal.entries[0]["out"]["value"] == {"[redacted]": ["x[redacted]y", 3]}


def test_summarize_counts_steps_usage_and_waits(tmp_path: Path) -> None:
    write_entries(
        tmp_path,
        [
            {"kind": "start", "in": {"value": None}},
            {"kind": "step", "pos": 1, "step": "model", "name": "model", "status": "started"},
            {
                "kind": "step",
                "pos": 1,
                "step": "model",
                "name": "model",
                "status": "ok",
                "usage": {"in_tokens": 10, "out_tokens": 5, "usd": 0.25},
                "t1": "2026-01-01T00:00:00+00:00",
            },
            {"kind": "step", "pos": 2, "step": "tool", "name": "write_file", "status": "ok"},
            {"kind": "wait", "pos": 3, "for": "approval"},
        ],
    )
    summary = summarize(read_journal(tmp_path))
    assert (summary.steps, summary.model_calls, summary.tokens, summary.usd) == (2, 1, 15, 0.25)
    assert summary.last_step == "tool:write_file"
    assert (summary.status, summary.waiting_for, summary.last_kind) == (
        "waiting",
        "approval",
        "wait",
    )
    assert summary.head == read_journal(tmp_path).head


def test_an_empty_or_absent_directory_is_an_empty_journal(tmp_path: Path) -> None:
    journal = read_journal(tmp_path / "nothing")
    assert journal.entries == [] and journal.head == ""
    assert summarize(journal).status == "new"


def test_unknown_kinds_are_refused_by_the_writer(tmp_path: Path) -> None:
    with JournalWriter.open(tmp_path) as writer, pytest.raises(BadInput, match="kind 'nope'"):
        writer.append({"kind": "nope"})
