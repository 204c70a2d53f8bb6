"""The record log's logic, run against both backends: the git forge and the in-memory one.

Every test here takes ``backend`` and runs twice: on a real embedded forge (a bare
repository, pushes by git's rules) and on ``MemoryForge``, which must answer by the same
compare-and-swap rules. What passes on one and fails on the other is a bug in the memory
backend (or a rule the git forge has that the record logic relies on unknowingly).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.errors import BadInput, Busy, Corrupt
from assay.forge.memory import MemoryForge
from assay.forge.records import (
    LostRace,
    RecordBackend,
    RecordCodec,
    RefLog,
    Stage,
    WritePolicy,
    refuse_on_loss,
    write,
)
from assay.plumbing import GitError, Identity, PushOutcome, RefUpdate

REF = "refs/assay/status/b1"
WRITER = Identity("writer", "writer@example.invalid")


def _positive(record: dict[str, Any]) -> None:
    if not isinstance(record.get("n"), int) or record["n"] < 0:
        raise ValueError("field 'n' must be a number of at least 0")


def _log(backend: RecordBackend) -> RefLog:
    return RefLog(backend, REF, kind="status", validate=_positive)


def test_appended_records_read_back_in_order(backend: RecordBackend) -> None:
    log = _log(backend)
    assert log.read() == [] and log.latest() is None
    first = log.append({"n": 1}, author=WRITER)
    log.append({"n": 2}, author=WRITER)
    assert [r["n"] for r in _log(backend).read()] == [1, 2]
    assert _log(backend).latest() == {"n": 2, "v": 1, "kind": "status"}
    assert [e.record["n"] for e in _log(backend).entries(after=first.commit)] == [2]


def test_a_writer_that_lost_the_race_appends_on_top_and_loses_nothing(
    backend: RecordBackend,
) -> None:
    slow, fast = _log(backend), _log(backend)
    slow.append({"n": 1}, author=WRITER)  # slow now believes the tip is its own commit
    fast.append({"n": 2}, author=WRITER)  # fast moves it first
    entry = slow.append({"n": 3}, author=WRITER)  # CAS on a stale tip: lost, re-read, again
    assert [r["n"] for r in _log(backend).read()] == [1, 2, 3]
    assert backend.refresh([REF])[REF] == entry.commit


def test_a_stale_compare_and_swap_moves_nothing(backend: RecordBackend) -> None:
    log = _log(backend)
    tip = log.append({"n": 1}, author=WRITER).commit
    child = backend.commit({"record.json": b"{}"}, parents=[tip], message="x", author=WRITER)
    other = backend.commit({"record.json": b"{}"}, parents=[], message="y", author=WRITER)
    lost = backend.push(
        [RefUpdate(REF, child, expected=other), RefUpdate("refs/assay/status/b2", child)]
    )
    assert lost.lost and not lost.ok
    assert backend.refresh([REF, "refs/assay/status/b2"]) == {REF: tip}  # atomic: none moved
    landed = backend.push([RefUpdate(REF, child, expected=tip)])
    assert landed.refs[REF] == PushOutcome.FAST_FORWARD


def test_an_invalid_record_is_refused_and_nothing_is_written(backend: RecordBackend) -> None:
    log = _log(backend)
    log.append({"n": 1}, author=WRITER)
    before = backend.refresh([REF])
    with pytest.raises(BadInput, match=r"refs/assay/status/b1: invalid record: field 'n'"):
        log.append({"n": -1}, author=WRITER)
    assert backend.refresh([REF]) == before


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"not json", "is not JSON"),
        (b'{"v": 2, "kind": "status", "n": 1}', "this Assay reads v1"),
        (b'{"v": 1, "kind": "events", "n": 1}', "expected 'status'"),
        (b'{"v": 1, "kind": "status", "n": "x"}', "field 'n' must be"),
        (b"[" * 100_000, "nested too deeply"),
    ],
    ids=["not-json", "newer-version", "other-kind", "bad-field", "deep"],
)
def test_a_bad_record_on_the_ref_is_corrupt_naming_ref_and_commit(
    backend: RecordBackend, blob: bytes, message: str
) -> None:
    commit = backend.commit({"record.json": blob}, parents=[], message="x", author=WRITER)
    assert backend.push([RefUpdate(REF, commit, expected=None)]).ok
    with pytest.raises(Corrupt, match=message) as raised:
        _log(backend).read()
    assert f"{REF} at {commit[:12]}" in raised.value.message


# -- the codec alone (no backend): every valid record round-trips, every change of a
# -- checked field is refused

CODEC = RecordCodec(REF, "status", validate=_positive)
# No deadline: a loaded CI machine must not turn a slow example into a failure.
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
records = st.fixed_dictionaries(
    {"n": st.integers(min_value=0, max_value=2**53)},
    optional={"note": st.text(max_size=40), "tags": st.lists(st.text(max_size=5), max_size=3)},
)


@FUZZ
@given(records)
def test_the_codec_round_trips_every_valid_record(record: dict[str, Any]) -> None:
    full, payload = CODEC.encode(record)
    assert CODEC.parse("0" * 40, payload) == full == {**record, "v": 1, "kind": "status"}
    assert payload == json.dumps(full, sort_keys=True, separators=(",", ":")).encode()


@FUZZ
@given(
    records,
    st.sampled_from(
        [("v", 2), ("v", "1"), ("kind", "events"), ("kind", None), ("n", -1), ("n", "1")]
    ),
)
def test_the_codec_refuses_each_malformed_field(
    record: dict[str, Any], change: tuple[str, object]
) -> None:
    full, _ = CODEC.encode(record)
    name, value = change
    broken = json.dumps({**full, name: value}).encode()
    with pytest.raises(Corrupt, match=f"field '{name}'"):
        CODEC.parse("0" * 40, broken)


def test_a_staged_record_lands_only_with_the_push_that_carries_it(
    backend: RecordBackend,
) -> None:
    # A sweep's writer stages its records and pushes them in one atomic push with other refs;
    # the record is checked and encoded by the log's codec either way.
    log = _log(backend)
    tip = log.append({"n": 1}, author=WRITER).commit
    stage = Stage(backend)
    staged = stage.record(log.codec, {"n": 2}, on=tip, author=WRITER, message="staged")
    assert staged.record == {"n": 2, "v": 1, "kind": "status"}
    assert [r["n"] for r in _log(backend).read()] == [1]  # nothing moved yet
    other = "refs/assay/status/b2"
    stage.add(RefUpdate(other, staged.commit))
    assert stage.push().ok
    assert [r["n"] for r in _log(backend).read()] == [1, 2]
    with pytest.raises(BadInput, match="field 'n'"):
        Stage(backend).record(log.codec, {"n": -1}, on=staged.commit, author=WRITER, message="x")
    assert _log(backend).head() == staged.commit


# -- the one writer: several refs staged, pushed atomically with a compare-and-swap on each,
# -- and its lost-race policy


def _stage_two(backend: RecordBackend, tips: dict[str, str | None], n: int) -> Stage:
    stage = Stage(backend)
    for ref in (REF, OTHER):
        codec = RecordCodec(ref, "status", validate=_positive)
        stage.record(codec, {"n": n}, on=tips.get(ref), author=WRITER, message=f"n={n}")
    return stage


OTHER = "refs/assay/status/b2"


def test_a_stage_of_several_refs_lands_whole(backend: RecordBackend) -> None:
    written = write(
        backend, lambda _again: _stage_two(backend, {}, 1), policy=WritePolicy(attempts=1)
    )
    assert written.ok and written.result is not None
    tips = backend.refresh([REF, OTHER])
    assert tips == {REF: written.stage.tip(REF), OTHER: written.stage.tip(OTHER)}


def test_a_lost_race_on_one_ref_rebuilds_the_whole_stage_on_fresh_tips(
    backend: RecordBackend,
) -> None:
    write(backend, lambda _a: _stage_two(backend, {}, 1), policy=WritePolicy(attempts=1))
    stale = backend.refresh([REF, OTHER])
    _log(backend).append({"n": 2}, author=WRITER)  # another writer moves one of the two
    builds: list[bool] = []

    def build(again: bool) -> Stage:
        builds.append(again)
        return _stage_two(backend, backend.refresh([REF, OTHER]) if again else stale, 3)

    write(backend, build, policy=WritePolicy(attempts=3))
    assert builds == [False, True]
    assert [r["n"] for r in _log(backend).read()] == [1, 2, 3]  # on top, nothing replaced
    other = RefLog(backend, OTHER, kind="status").read()
    assert [r["n"] for r in other] == [1, 3]


def test_a_refusing_writer_hears_its_own_error_and_nothing_moves(
    backend: RecordBackend,
) -> None:
    write(backend, lambda _a: _stage_two(backend, {}, 1), policy=WritePolicy(attempts=1))
    stale = backend.refresh([REF, OTHER])
    _log(backend).append({"n": 2}, author=WRITER)
    before = backend.refresh([REF, OTHER])
    builds: list[bool] = []

    def build(again: bool) -> Stage:
        builds.append(again)
        return _stage_two(backend, stale, 3)

    refuse = refuse_on_loss(lambda result: Busy(f"lost: {sorted(result.refs)}"))
    with pytest.raises(Busy, match="lost"):
        write(backend, build, policy=WritePolicy(attempts=5, on_lost=refuse))
    assert builds == [False]  # refused, never rebuilt
    assert backend.refresh([REF, OTHER]) == before


def test_a_writer_given_its_lost_race_back_decides_itself(backend: RecordBackend) -> None:
    write(backend, lambda _a: _stage_two(backend, {}, 1), policy=WritePolicy(attempts=1))
    stale = backend.refresh([REF, OTHER])
    _log(backend).append({"n": 2}, author=WRITER)
    policy = WritePolicy(attempts=5, on_lost=lambda _r: LostRace.GIVE_BACK)
    written = write(backend, lambda _a: _stage_two(backend, stale, 3), policy=policy)
    assert not written.ok and written.result is not None and written.result.lost


def test_races_lost_past_the_attempts_are_busy(backend: RecordBackend) -> None:
    write(backend, lambda _a: _stage_two(backend, {}, 1), policy=WritePolicy(attempts=1))
    stale = backend.refresh([REF, OTHER])
    _log(backend).append({"n": 2}, author=WRITER)
    with pytest.raises(Busy, match="lost 3 append races in a row"):
        write(backend, lambda _a: _stage_two(backend, stale, 3), policy=WritePolicy(attempts=3))
    policy = WritePolicy(attempts=2, exhausted=lambda _r: Busy("the merge kept losing"))
    with pytest.raises(Busy, match="the merge kept losing"):
        write(backend, lambda _a: _stage_two(backend, stale, 3), policy=policy)


def test_a_pinned_ref_that_moved_makes_the_whole_push_lose(backend: RecordBackend) -> None:
    pinned = _log(backend).append({"n": 1}, author=WRITER).commit
    _log(backend).append({"n": 2}, author=WRITER)  # the pinned ref moves past what was read

    def build(_again: bool) -> Stage:
        stage = Stage(backend)
        stage.pin(REF, pinned)
        codec = RecordCodec(OTHER, "status", validate=_positive)
        stage.record(codec, {"n": 9}, on=None, author=WRITER, message="beside the pin")
        return stage

    policy = WritePolicy(attempts=1, on_lost=lambda _r: LostRace.GIVE_BACK)
    assert not write(backend, build, policy=policy).ok
    assert OTHER not in backend.refresh([OTHER])


def test_a_stage_of_pins_alone_pushes_nothing(backend: RecordBackend) -> None:
    tip = _log(backend).append({"n": 1}, author=WRITER).commit
    pushes = getattr(backend, "pushes", None)
    stage = Stage(backend)
    stage.pin(REF, tip)
    written = write(backend, lambda _a: stage, policy=WritePolicy(attempts=1))
    assert written.ok and written.result is None
    assert getattr(backend, "pushes", None) == pushes


def test_a_ref_staged_twice_is_refused() -> None:
    stage = Stage(MemoryForge())
    stage.add(RefUpdate(REF, "a" * 40, expected=None))
    with pytest.raises(ValueError, match="staged twice"):
        stage.add(RefUpdate(REF, "b" * 40, expected=None))


def test_records_staged_on_one_ref_chain_and_keep_the_first_compare_and_swap(
    backend: RecordBackend,
) -> None:
    tip = _log(backend).append({"n": 1}, author=WRITER).commit
    stage = Stage(backend)
    codec = _log(backend).codec
    first = stage.record(codec, {"n": 2}, on=tip, author=WRITER, message="2")
    second = stage.record(codec, {"n": 3}, on=tip, author=WRITER, message="3")
    assert [(u.ref, u.new, u.expected) for u in stage.updates] == [(REF, second.commit, tip)]
    assert stage.push().ok
    assert [e.commit for e in _log(backend).entries()][1:] == [first.commit, second.commit]


def test_a_push_refused_for_another_reason_is_a_git_error() -> None:
    backend = MemoryForge()
    stage = Stage(backend)
    stage.add(RefUpdate(REF, "f" * 40, expected=None))  # no such commit: the forge refuses it
    with pytest.raises(GitError, match="append refused"):
        write(backend, lambda _a: stage, policy=WritePolicy(attempts=3))
