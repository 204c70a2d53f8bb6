"""Properties: any edit of a sealed record is caught; a row's text reaches sh unchanged."""

from __future__ import annotations

import json
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.errors import Corrupt
from assay.evidence.records import decode, encode, seal
from assay.evidence.runner import row_argv
from tests.evidence.gatekit import record

BASE = seal(
    record(
        exit=1,
        seconds=1.5,
        output_sha256="sha256:" + "0" * 64,
        output_bytes=12,
        output_tail="1 failed",
        env_fingerprint={"python": "3.11.2"},
        journal_head="sha256:" + "1" * 64,
        at="2026-01-01T00:00:00Z",
    ),
    prev="sha256:" + "2" * 64,
    key=None,
)

EDITABLE = [
    ("row", st.text(min_size=1, max_size=10)),
    ("command", st.text(max_size=20)),
    ("exit", st.integers(min_value=-20, max_value=300)),
    ("timed_out", st.booleans()),
    ("seconds", st.floats(min_value=0, max_value=1e6, allow_nan=False)),
    ("output_tail", st.text(max_size=50)),
    ("head_sha", st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)),
    ("verifier", st.text(max_size=20)),
    ("journal_head", st.text(max_size=20)),
    ("prev", st.text(max_size=20)),
    ("env_fingerprint", st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)),
]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), which=st.integers(min_value=0, max_value=len(EDITABLE) - 1))
def test_any_edit_of_a_sealed_record_is_corrupt(data: st.DataObject, which: int) -> None:
    name, strategy = EDITABLE[which]
    raw = json.loads(encode(BASE))
    value = data.draw(strategy)
    if raw[name] == value:
        return  # not an edit
    raw[name] = value
    with pytest.raises(Corrupt):
        decode(json.dumps(raw).encode(), source="evidence/calc")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="\x00"), min_size=1, max_size=60))
def test_a_row_runs_as_its_own_words_or_verbatim_under_sh(command: str) -> None:
    argv = row_argv(command)
    if argv[:2] == ["/bin/sh", "-c"]:
        assert argv == ["/bin/sh", "-c", command]
    else:
        assert argv == shlex.split(command)
