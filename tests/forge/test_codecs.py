"""Every real record codec: each valid record round-trips, each malformed field is refused.

One codec per log (``assay.forge.records.Codec``): what a writer encodes is exactly what a
reader decodes, and a stored record with any one checked field broken is refused on read,
naming the field (``Corrupt``; a review: ``BadInput``, the gate's error for it), never read
leniently. The records are drawn by hypothesis; each refusal is a field and a value its
codec must not accept.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.claims.record import STATES, ClaimCodec, ClaimRecord, format_time
from assay.desks.records.events import EVENT_KINDS, events_codec
from assay.errors import BadInput, Corrupt
from assay.evidence.holdout import holdout_codec
from assay.evidence.records import seal
from assay.evidence.reviews import REVIEW_STATES, ReviewCodec, ReviewRecord
from assay.evidence.store import EvidenceCodec
from assay.forge.records import Codec
from assay.forge.settings import settings_codec
from assay.forgestate.status import status_codec
from assay.github.briefids import binding_codec
from assay.github.events import cursor_codec
from assay.github.mirror import mirror_codec
from assay.github.pins import pin_codec
from assay.sweep.apply import ORPHANS_CODEC, SWEEP_LOG_CODEC
from tests.evidence.test_records import _record
from tests.gatekeys import key_for

COMMIT = "c" * 40
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ids = st.from_regex(r"[a-z][a-z0-9_-]{0,20}", fullmatch=True)
text = st.text(max_size=40)
short = st.text(max_size=20)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
counters = st.integers(min_value=1, max_value=2**53)
stamps = moments.map(lambda m: m.strftime("%Y-%m-%dT%H:%M:%SZ"))
hexes = st.from_regex(r"[0-9a-f]{64}", fullmatch=True)


@dataclass(frozen=True)
class Case:
    """One codec: its valid records, how a stored one reads as JSON, and what it refuses."""

    codec: Codec[Any]
    records: st.SearchStrategy[Any]
    refusals: tuple[tuple[str, object], ...]
    error: type[Exception] = Corrupt
    as_json: Callable[[Any], dict[str, Any]] = dict
    same: Callable[[Any], Any] = lambda record: record


claims = st.builds(
    ClaimRecord,
    brief=st.just("b1"),
    desk=ids,
    holder=st.text(min_size=1, max_size=60),
    fence=counters,
    state=st.sampled_from(STATES),
    since=moments.map(format_time),
    renewed_at=moments.map(format_time),
    lease_s=st.floats(min_value=0.001, max_value=30 * 86400.0),
    waiting_for=st.none() | short,
    attempt=counters,
    journal_head=st.none() | hexes.map(lambda h: f"sha256:{h}"),
    note=text,
    calls=st.integers(min_value=0, max_value=2**53),
    workflow_run=st.integers(min_value=0, max_value=2**53),
)
events = st.fixed_dictionaries(
    {
        "id": ids,
        "event": st.sampled_from(sorted(EVENT_KINDS)),
        "text": text,
        "actor": short,
        "at": stamps,
        "data": st.dictionaries(short, short | st.integers(), max_size=3),
    }
)
reviews = st.builds(
    ReviewRecord,
    brief=st.just("b1"),
    branch=st.just("assay/b1"),
    head_sha=hexes.map(lambda h: h[:40]),
    title=text,
    body=text,
    state=st.sampled_from(REVIEW_STATES),
    updated_at=stamps,
)
statuses = st.fixed_dictionaries(
    {"state": st.sampled_from(["stuck", "woken", "paused"]), "note": text, "by": ids},
    optional={"at": stamps, "sweep": ids, "brief": st.just("b1"), "fence": counters},
)
sweeps = st.fixed_dictionaries(
    {
        "sweep": ids,
        "by": ids,
        "at": stamps,
        "actions": st.lists(st.fixed_dictionaries({"brief": ids, "action": ids}), max_size=3),
    }
)
orphans = st.fixed_dictionaries(
    {"refs": st.lists(ids.map(lambda b: f"refs/heads/assay/{b}"), max_size=4), "by": ids}
)
gate_key = key_for("codecs").public.text
budgets = st.integers(min_value=0, max_value=100_000)
settings_records = st.fixed_dictionaries(
    {},
    optional={
        "gate_public_key": st.sampled_from(["", gate_key]),
        "holdout_public_key": short,
        "pushes_per_minute": budgets,
        "merges_per_minute": budgets,
    },
)
mirrors = st.fixed_dictionaries(
    {"brief": st.just("b1")},
    optional={
        "issue": st.none() | counters,
        "pull": st.none() | counters,
        "pull_state": st.none() | st.sampled_from(["draft", "ready", "merged"]),
        "check_runs": st.dictionaries(hexes, counters, max_size=2),
    },
)
sealed = st.fixed_dictionaries({"alg": short, "epk": short, "nonce": short, "ct": text})
holdouts = st.fixed_dictionaries(
    {
        "rows": st.lists(
            st.fixed_dictionaries({"id": ids, "sealed": sealed}),
            max_size=3,
            unique_by=lambda row: row["id"],
        )
    }
)
pins = st.fixed_dictionaries(
    {
        "issue": counters,
        "digest": hexes,
        "title": short,
        "labels": st.lists(short, max_size=3),
        "body": text,
        "via": st.from_regex(r"(label|comment)-\d{1,6}", fullmatch=True),
        "act_at": stamps,
        "seen_at": stamps,
        "writer": short,
        "at": stamps,
        "sig": short,
    }
)
bindings = st.fixed_dictionaries(
    {"brief": st.just("b1"), "issue": counters, "at": stamps, "sig": short}
)
cursors = st.fixed_dictionaries(
    {"since": st.none() | stamps, "ignored": st.dictionaries(short, stamps, max_size=3)}
)
evidence = st.builds(
    lambda row, passed, tail: seal(
        dataclasses.replace(
            _record(row=row, exit=0 if passed else 1), brief="b1", output_tail=tail
        ),
        prev="",
        key=None,
    ),
    row=ids,
    passed=st.booleans(),
    tail=text,
)

CASES: dict[str, Case] = {
    "claim": Case(
        ClaimCodec("b1"),
        claims,
        (
            ("fence", 0),
            ("fence", "1"),
            ("state", "gone"),
            ("lease_s", -1),
            ("holder", ""),
            ("brief", "b2"),
            ("desk", "../x"),
            ("journal_head", "nope"),
            ("since", "yesterday"),
            ("calls", -1),
            ("v", 2),
        ),
        as_json=lambda record: record.to_json(),
    ),
    "event": Case(
        events_codec("b1"),
        events,
        (
            ("id", ""),
            ("id", 5),
            ("event", "teleport"),
            ("text", None),
            ("actor", "x" * 201),
            ("at", "x" * 65),
            ("data", []),
            ("v", 2),
            ("kind", "status"),
        ),
    ),
    "review": Case(
        ReviewCodec("b1"),
        reviews,
        (("state", "open"), ("title", 5), ("brief", "b2"), ("head_sha", None), ("v", 2)),
        error=BadInput,
        as_json=lambda record: record.to_json(),
        same=lambda record: record.to_json(),
    ),
    "evidence": Case(
        EvidenceCodec("b1"),
        evidence,
        (("row", 5), ("exit", "0"), ("brief", 5), ("pinned", "x"), ("sandboxed", True)),
        as_json=lambda record: json.loads(EvidenceCodec("b1").encode(record)[1]),
        same=lambda record: (record.digest, record.row, record.passed, record.output_tail),
    ),
    "status": Case(
        status_codec("b1"),
        statuses,
        (("fence", -1), ("note", "x" * 4001), ("state", 5), ("v", 2), ("kind", "events")),
    ),
    "sweep log": Case(SWEEP_LOG_CODEC, sweeps, (("actions", "x"), ("by", 5), ("at", None))),
    "sweep orphans": Case(ORPHANS_CODEC, orphans, (("refs", [1]), ("refs", "x"))),
    "settings": Case(
        settings_codec(),
        settings_records,
        (
            ("gate_public_key", "ed25519:nope"),
            ("gate_public_key", 5),
            ("pushes_per_minute", -1),
            ("merges_per_minute", True),
            ("surprise", 1),
        ),
    ),
    "mirror": Case(
        mirror_codec("b1"),
        mirrors,
        (("issue", "7"), ("pull_state", 3), ("check_runs", []), ("brief", "../b")),
    ),
    "holdout": Case(
        holdout_codec("b1"),
        holdouts,
        (("rows", {}), ("rows", [{"id": "r"}]), ("rows", [{"id": "r", "sealed": {}}])),
    ),
    "pins": Case(
        pin_codec(7),
        pins,
        (
            ("issue", 0),
            ("digest", "abc"),
            ("via", "push-1"),
            ("writer", 5),
            ("body", None),
            ("labels", "desk:x"),
            ("act_at", "yesterday"),
        ),
    ),
    "cursor": Case(cursor_codec(), cursors, (("since", "yesterday"), ("ignored", []))),
    "brief id binding": Case(
        binding_codec("b1"),
        bindings,
        (("brief", "../b"), ("issue", 0), ("issue", "3"), ("sig", None), ("at", "x" * 513)),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_valid_record_round_trips(name: str) -> None:
    case = CASES[name]

    @FUZZ
    @given(case.records)
    def check(record: Any) -> None:
        stored, payload = case.codec.encode(record)
        assert case.same(case.codec.parse(COMMIT, payload)) == case.same(stored)

    check()


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [(name, field, value) for name, case in CASES.items() for field, value in case.refusals],
    ids=lambda item: str(item)[:24],
)
def test_each_malformed_field_is_refused_naming_it(name: str, field: str, value: object) -> None:
    case = CASES[name]

    @FUZZ
    @given(case.records)
    def check(record: Any) -> None:
        stored, _ = case.codec.encode(record)
        broken = {**case.as_json(stored), field: value}
        payload = json.dumps(broken).encode()
        with pytest.raises(case.error) as refused:
            case.codec.parse(COMMIT, payload)
        assert field in str(refused.value)

    check()


def test_a_codec_refuses_to_encode_what_it_would_refuse_to_read() -> None:
    record = ClaimRecord("b1", "coder", "h", 1, "held", "x", "x", 60.0)
    with pytest.raises(BadInput, match="refs/assay/claims/b1: claim record cannot be stored"):
        ClaimCodec("b1").encode(record)
    with pytest.raises(BadInput, match="does not go here"):
        ClaimCodec("b2").encode(dataclasses.replace(record, since="2026-01-01T00:00:00.000Z"))
    with pytest.raises(BadInput, match="field 'event'"):
        events_codec("b1").encode({"id": "e", "event": "x", "text": "", "actor": "", "at": ""})
    too_long = {"state": "stuck", "note": "x" * 5000}
    with pytest.raises(BadInput, match="status record refused"):
        status_codec("b1").encode(too_long)
    moment = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=1)
    assert ClaimCodec("b1").encode(
        dataclasses.replace(record, since=format_time(moment), renewed_at=format_time(moment))
    )


def test_a_sealed_record_of_another_brief_is_refused_on_this_briefs_log() -> None:
    other = seal(dataclasses.replace(_record(row="unit"), brief="b2"), prev="", key=None)
    _, payload = EvidenceCodec("b2").encode(other)
    with pytest.raises(Corrupt, match="names brief 'b2', not 'b1'"):
        EvidenceCodec("b1").parse(COMMIT, payload)
    with pytest.raises(BadInput, match="does not go here"):
        EvidenceCodec("b1").encode(other)
