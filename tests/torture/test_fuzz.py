"""Fuzzing the inputs Assay reads from others: brief files (through ``assay brief add``),
desk manifests, journals, event records, claim records and GitHub comments.

The promise: a value or a typed ``AssayError`` (with its exit code), never a traceback of
another kind, and never a partial write (the forge's main is unchanged after a refused
brief; a journal that failed to read or resume is byte-for-byte what it was).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.claims.record import parse_record
from assay.cli.main import main as assay_main
from assay.desks import parse_manifest
from assay.desks.records.events import validate_record
from assay.errors import AssayError, BadInput, Corrupt
from assay.evidence.claimed import claimed_from_entries
from assay.forge import init_forge, open_forge
from assay.forgestate.snapshot import journal_info
from assay.github.events import KINDS, parse_command
from assay.journal import entries, read_journal, summarize
from assay.journal.format import encode_line
from assay.models.base import ModelReply, Usage
from assay.runtime import Run, execute
from assay.runtime.history import History
from tests.torture.conftest import pick

FUZZ = settings(
    max_examples=pick(40, 1000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SLOW_FUZZ = settings(FUZZ, max_examples=pick(8, 150))

GOOD_BRIEF = """---
id: fuzzed
title: A fuzzed brief
priority: 2
labels: [x]
verify:
  - id: unit
    run: pytest -q
budget:
  steps: 10
---
Body text.
"""
GOOD_MANIFEST = """name: coder
kind: agent
takes: {globs: ["*"]}
model: {adapter: scripted, script: s.json}
tools: [read_file, write_file, run]
run: {allow: ["pytest -q"]}
lease: 30
"""


def mutate(text: str, data: st.DataObject) -> str:
    """A few byte-level edits of a valid document (cut, insert, replace, duplicate)."""
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["cut", "insert", "replace", "dup"]))
        if op == "cut":
            text = text[:pos] + text[pos + data.draw(st.integers(1, 20)) :]
        elif op == "insert":
            text = text[:pos] + data.draw(st.text(max_size=12)) + text[pos:]
        elif op == "replace" and pos < len(text):
            text = text[:pos] + data.draw(st.characters()) + text[pos + 1 :]
        else:
            text = text[:pos] + text[pos : pos + 30] + text[pos:]
    return text


# ------------------------------------------------------------------- briefs, via the CLI


@pytest.fixture(scope="module")
def brief_forge() -> Any:
    with tempfile.TemporaryDirectory(prefix="fuzz-forge-") as tmp:
        path = init_forge(Path(tmp) / "forge.git")
        yield path


def main_tip(forge_path: Path) -> str | None:
    with open_forge(str(forge_path), cache_dir=forge_path.parent / "tip-cache") as forge:
        return forge.ls_refs("refs/heads/main").get("refs/heads/main")


def run_cli(*args: str) -> int:
    with pytest.raises(SystemExit) as ended:
        assay_main(list(args))
    return int(ended.value.code or 0)


@SLOW_FUZZ
@given(data=st.data())
def test_brief_add_takes_a_brief_or_refuses_it_whole(
    brief_forge: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    text = mutate(GOOD_BRIEF, data)
    folder = tmp_path_factory.mktemp("brief")
    source = folder / "fuzzed.md"
    source.write_text(text, encoding="utf-8", errors="surrogatepass")
    before = main_tip(brief_forge)
    code = run_cli("brief", "add", str(source), "--forge", str(brief_forge), "--replace")
    after = main_tip(brief_forge)
    assert code in {0, BadInput.code}, code
    if code != 0:
        assert after == before  # refused: nothing written


# ------------------------------------------------------------------- manifests


@FUZZ
@given(data=st.data())
def test_manifest_loader_gives_a_manifest_or_bad_input(data: st.DataObject) -> None:
    text = mutate(GOOD_MANIFEST, data)
    try:
        parse_manifest(text, source="desks/coder.yaml")
    except BadInput as error:
        assert "desks/coder.yaml" in str(error)


# ------------------------------------------------------------------- journals


class _Model:
    name = "fuzz"
    context_window = 100_000

    def complete(self, messages: Any, *, tools: Any = None) -> ModelReply:
        return ModelReply({"role": "assistant", "content": "x" * 300}, Usage(3, 4))


def desk(run: Run, _: Any) -> Any:
    total = 0
    for i in range(4):
        total += run.step(f"s{i}", lambda i=i: i)
    run.model([{"role": "user", "content": "q" * 500}])
    run.checkpoint({"total": total})
    return total


@pytest.fixture(scope="module")
def golden_journal() -> Any:
    with tempfile.TemporaryDirectory(prefix="fuzz-journal-") as tmp:
        directory = Path(tmp) / "journal"
        execute(desk, None, journal_dir=directory, model=_Model())
        yield directory


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def corrupt_journal(directory: Path, data: st.DataObject) -> None:
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    target = data.draw(st.sampled_from(files))
    raw = bytearray(target.read_bytes())
    op = data.draw(st.sampled_from(["flip", "cut", "insert", "drop_line", "dup_line", "swap"]))
    lines = raw.split(b"\n")
    if op == "flip" and raw:
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= data.draw(st.integers(1, 255))
    elif op == "cut":
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    elif op == "insert":
        pos = data.draw(st.integers(0, len(raw)))
        raw[pos:pos] = data.draw(st.binary(min_size=1, max_size=40))
    elif op in {"drop_line", "dup_line", "swap"} and len(lines) > 2:
        i = data.draw(st.integers(0, len(lines) - 2))
        j = data.draw(st.integers(0, len(lines) - 2))
        if op == "drop_line":
            del lines[i]
        elif op == "dup_line":
            lines.insert(i, lines[i])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        raw = bytearray(b"\n".join(lines))
    target.write_bytes(bytes(raw))


@FUZZ
@given(data=st.data())
def test_journal_reader_and_resume_never_crash_or_write_on_corruption(
    golden_journal: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    directory = tmp_path_factory.mktemp("j") / "journal"
    shutil.copytree(golden_journal, directory)
    corrupt_journal(directory, data)
    before = snapshot(directory)
    with contextlib.suppress(AssayError):
        read_journal(directory)
    assert snapshot(directory) == before  # reading never writes
    try:
        result = execute(desk, None, journal_dir=directory, model=_Model())
    except AssayError as error:
        assert snapshot(directory) == before, f"{type(error).__name__} after a partial write"
        return
    # Accepted (a torn last line, a change that kept the chain): the run replays to its output.
    assert result.output == 6


def test_journal_bit_flip_in_the_middle_is_corrupt(golden_journal: Path, tmp_path: Path) -> None:
    directory = tmp_path / "journal"
    shutil.copytree(golden_journal, directory)
    segment = sorted(directory.glob("*.jsonl"))[0]
    lines = segment.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"s1"', b'"s9"')
    segment.write_bytes(b"\n".join(lines))
    with pytest.raises(Corrupt):
        read_journal(directory)


# ------------------------------------------------------------------- events, claims, comments

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
# Every key some entry kind reads, and every kind: what a forged line may carry.
ENTRY_KEYS = sorted(
    {
        item.metadata.get("key", item.name)
        for record in entries.KINDS
        for item in dataclasses.fields(record)
    }
)
ENTRY_KINDS = sorted({record.KIND for record in entries.KINDS})
finite_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def forge_journal(directory: Path, data: st.DataObject) -> None:
    """Change fields of a journal's lines and chain the lines again, as a desk writing its
    own branch can: each line then passes its checksum and links to the one before."""
    segment = sorted(directory.glob("*.jsonl"))[0]
    lines = [json.loads(raw) for raw in segment.read_bytes().splitlines()]
    for _ in range(data.draw(st.integers(1, 3))):
        line = lines[data.draw(st.integers(0, len(lines) - 1))]
        if data.draw(st.booleans()):
            line["kind"] = data.draw(st.sampled_from(ENTRY_KINDS))
        key = data.draw(st.sampled_from(sorted(set(ENTRY_KEYS) | set(line))))
        if key not in {"seq", "prev", "sum", "v", "run"}:
            line[key] = data.draw(finite_json)
    out, prev = [], ""
    for line in lines:
        line.pop("sum", None)
        line["prev"] = prev
        raw, prev = encode_line(line)
        out.append(raw)
    segment.write_bytes(b"\n".join(out) + b"\n")


@FUZZ
@given(data=st.data())
def test_a_forged_rechained_journal_is_read_or_refused_typed(
    golden_journal: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Every view of a journal, and its resume, meets a forged line with an AssayError."""
    directory = tmp_path_factory.mktemp("j") / "journal"
    shutil.copytree(golden_journal, directory)
    forge_journal(directory, data)
    before = snapshot(directory)
    try:
        journal = read_journal(directory)
        summarize(journal)
        journal_info(journal.entries)
        claimed_from_entries(journal.entries, load_blob=journal.load)
        History.build(journal.entries)
    except AssayError:
        pass
    assert snapshot(directory) == before  # reading never writes
    try:
        execute(desk, None, journal_dir=directory, model=_Model())
    except AssayError as error:
        assert snapshot(directory) == before, f"{type(error).__name__} after a partial write"


EVENT = {
    "v": 1,
    "kind": "events",
    "id": "e1",
    "event": "approve",
    "text": "",
    "actor": "a",
    "at": "2026-11-29T00:00:00Z",
    "data": {},
}


@FUZZ
@given(
    changes=st.dictionaries(st.sampled_from([*EVENT, "extra"]), json_values, max_size=4),
    drop=st.lists(st.sampled_from(list(EVENT)), max_size=3),
)
def test_event_records_are_an_event_or_bad_input(changes: dict[str, Any], drop: list[str]) -> None:
    record = {k: v for k, v in {**EVENT, **changes}.items() if k not in drop}
    try:
        event = validate_record(record, where="refs/assay/events/b1@abc")
    except BadInput as error:
        assert "refs/assay/events/b1" in str(error)
    else:
        assert event.kind in {"approve", "reject", "signal", "cancel", "timer"}


CLAIM = {
    "v": 1,
    "brief": "b1",
    "desk": "coder",
    "holder": "h",
    "fence": 1,
    "state": "held",
    "since": "2026-11-29T00:00:00Z",
    "renewed_at": "2026-11-29T00:00:00Z",
    "lease_s": 30,
    "waiting_for": None,
    "attempt": 1,
}


@FUZZ
@given(
    changes=st.dictionaries(st.sampled_from([*CLAIM, "extra"]), json_values, max_size=4),
    garbage=st.one_of(st.none(), st.binary(max_size=40)),
)
def test_claim_records_are_a_record_or_corrupt(
    changes: dict[str, Any], garbage: bytes | None
) -> None:
    blob = garbage if garbage is not None else json.dumps({**CLAIM, **changes}).encode()
    try:
        parse_record(blob, ref="refs/assay/claims/b1", sha="0" * 40)
    except AssayError as error:
        assert "refs/assay/claims/b1" in str(error)


@FUZZ
@given(
    body=st.one_of(
        st.text(max_size=80),
        st.builds(
            lambda verb, rest: f"/assay {verb}{rest}",
            st.sampled_from(["approve", "reject", "steer", "cancel", "merge", "APPROVE", ""]),
            st.text(max_size=40),
        ),
    )
)
def test_comment_parser_returns_a_known_command_or_nothing(body: str) -> None:
    parsed = parse_command(body)
    if parsed is not None:
        kind, text = parsed
        assert kind in set(KINDS.values())
        assert "\n" not in text  # only the first line is a command
