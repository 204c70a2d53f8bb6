"""Fuzzing every record decoder on the forge: claim, event, status, evidence, review.

The rule (issue: nothing can wedge the forge): any bytes give a record or a typed
``AssayError`` that is not ``Internal`` (never exit 70), and a claim the decoder refuses
reaches the board as state ``invalid`` for its own brief instead of breaking the read.
(Briefs and desk manifests are fuzzed in ``tests/briefs/test_fuzz.py``.) Inputs are
mutations of valid records, so the fuzzer spends its examples near the format, plus raw
bytes, huge numbers and deep nesting.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.claims.record import parse_record
from assay.desks.records.events import MAX_RECORD_BYTES, decode_event, events_codec, validate_record
from assay.errors import AssayError, Internal
from assay.evidence.records import decode, encode, seal
from assay.evidence.reviews import parse_review
from assay.forge.records import RecordCodec
from assay.forgestate.briefs import brief_state
from assay.forgestate.snapshot import ClaimInfo
from assay.forgestate.status import MAX_STATUS_BYTES, status_problem
from assay.states import State
from tests.evidence.test_records import _record
from tests.gatekeys import key_for

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CLAIM = {
    "v": 1,
    "brief": "b1",
    "desk": "coder",
    "holder": "h" * 32,
    "fence": 1,
    "state": "held",
    "since": "2026-01-01T00:00:00.000Z",
    "renewed_at": "2026-01-01T00:00:00.000Z",
    "lease_s": 300.0,
    "waiting_for": None,
    "attempt": 1,
    "journal_head": None,
    "note": "",
}
EVENT = {
    "v": 1,
    "kind": "events",
    "id": "e1",
    "event": "approve",
    "text": "",
    "actor": "x",
    "at": "2026-01-01T00:00:00Z",
    "data": {},
}
STATUS = {
    "v": 1,
    "kind": "status",
    "brief": "b1",
    "state": "stuck",
    "note": "",
    "by": "s",
    "fence": 1,
    "at": "2026-01-01T00:00:00Z",
    "sweep": "abc",
}
REVIEW = {
    "v": 1,
    "brief": "b1",
    "branch": "assay/b1",
    "head_sha": "0" * 40,
    "title": "t",
    "body": "b",
    "state": "ready",
    "updated_at": "2026-01-01T00:00:00Z",
}

odd = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e23, -1.0, 0, 2**63, "9999-12-31T23:59:59.000Z", "0001-01-01T00:00:00Z"]),
    st.text(max_size=40),
    st.sampled_from(["x" * 100_000, "../../etc", "\x00", "sha256:zz", "held", "waiting"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def mutated(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``base`` with some fields replaced by odd values, some dropped, some added."""
    keys = st.sampled_from(sorted(base))
    return st.tuples(
        st.dictionaries(keys, odd, max_size=4),
        st.lists(keys, max_size=2),
        st.dictionaries(st.text(max_size=6), odd, max_size=2),
    ).map(
        lambda parts: {
            **{k: v for k, v in base.items() if k not in parts[1]},
            **parts[0],
            **parts[2],
        }
    )


def blobs(base: dict[str, Any]) -> st.SearchStrategy[bytes]:
    as_json = mutated(base).map(lambda d: json.dumps(d, default=str).encode())
    deep = st.integers(min_value=1, max_value=200_000).map(lambda n: b"[" * n + b"]" * n)
    return st.one_of(as_json, as_json, as_json, st.binary(max_size=200), deep)


def typed(error: BaseException) -> None:
    assert isinstance(error, AssayError) and not isinstance(error, Internal), repr(error)


@FUZZ
@given(blobs(CLAIM))
def test_claim_decoder(blob: bytes) -> None:
    now = datetime.now(UTC)
    # The one read model reads a claim as the claims decoder returns it (ClaimInfo.from_record)
    # and a claim it refuses as its brief's invalid reason: state `invalid`, never raising.
    try:
        record = parse_record(blob, ref="refs/assay/claims/b1", sha="0" * 40)
    except Exception as error:
        typed(error)
        assert isinstance(error, AssayError)
        state = brief_state(None, None, on_main=True, now=now, invalid=error.message)
        assert state == State.INVALID
    else:
        info = ClaimInfo.from_record(record)
        state = brief_state(info, None, on_main=True, now=now)
        assert state in State
        info.expired(now, 30.0)  # the lease clock arithmetic of an accepted record


@FUZZ
@given(blobs(EVENT))
def test_event_decoder(blob: bytes) -> None:
    try:
        event = decode_event(events_codec("b1"), "0" * 40, blob, signed_by=None)
    except Exception as error:
        typed(error)
    else:
        assert len(blob) <= MAX_RECORD_BYTES
        assert validate_record(json.loads(blob), where="again").id == event.id


@FUZZ
@given(blobs(STATUS))
def test_status_decoder(blob: bytes) -> None:
    try:
        record = RecordCodec("refs/assay/status/b1", "status").parse("0" * 40, blob)
    except Exception as error:
        typed(error)
    else:
        # The board's and the sweep's decoder: a reason to quarantine it, or "", never raising.
        problem = status_problem(record)
        assert isinstance(problem, str)
        assert problem or len(blob) <= MAX_STATUS_BYTES


@FUZZ
@given(
    st.one_of(blobs(json.loads(encode(seal(_record(), prev="", key=key_for("gate"))))), st.binary())
)
def test_evidence_decoder(blob: bytes) -> None:
    try:
        decode(blob, source="evidence/b1", key=key_for("gate").public)
    except Exception as error:
        typed(error)


@FUZZ
@given(blobs(REVIEW))
def test_review_decoder(blob: bytes) -> None:
    try:
        parse_review(blob, where="reviews/b1")
    except Exception as error:
        typed(error)
