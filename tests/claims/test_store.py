"""ClaimStore and Heartbeat against a real forge: the claim lifecycle of DESIGN §5.

The claim rules themselves (no process, no thread) run on both of the records layer's
backends (``backend``: the git forge and ``MemoryForge``); what depends on git itself (a
commit's author, a heartbeat against a second handle on the forge) on the git forge."""

from __future__ import annotations

import subprocess
import threading
from datetime import datetime, timedelta

import pytest

from assay.claims import Claim, ClaimRecord, ClaimStore, Heartbeat
from assay.claims.record import format_time, now_utc, skew_from_env, validate
from assay.errors import BadInput, Busy, Corrupt, Fenced
from assay.forge import Forge, open_forge
from assay.forge.records import RecordBackend
from assay.plumbing import Identity, RefUpdate
from tests.forge_fixtures import wait_until


def _later(seconds: float) -> datetime:
    """A clock reading ``seconds`` after the real one (to judge expiry without waiting)."""
    return now_utc() + timedelta(seconds=seconds)


def test_acquire_creates_fence_one_and_a_second_desk_is_busy(backend: RecordBackend) -> None:
    store = ClaimStore(backend)
    claim = store.acquire("b1", "coder", lease_s=60)
    assert (claim.fence, claim.record.state, claim.record.attempt) == (1, "held", 1)
    with pytest.raises(Busy, match="held by desk coder") as raised:
        store.acquire("b1", "other", lease_s=60)
    assert raised.value.code == 3
    record = store.get("b1")
    assert record is not None and record.holder == claim.holder and record.sha == claim.sha


def test_steal_after_expiry_fences_the_old_holder(backend: RecordBackend) -> None:
    store = ClaimStore(backend, skew_s=30)
    old = store.acquire("b1", "coder", lease_s=60)
    # Exactly at renewed_at + lease + skew the claim is still live; a moment later it is not.
    assert not old.record.expired(skew_s=30, now=_at(old.record, 90))
    assert old.record.expired(skew_s=30, now=_at(old.record, 90.001))
    with pytest.raises(Busy):
        ClaimStore(backend, skew_s=30, clock=lambda: _later(89)).acquire("b1", "x", lease_s=60)
    thief = ClaimStore(backend, skew_s=30, clock=lambda: _later(91))
    new = thief.acquire("b1", "reviewer", lease_s=60)
    assert (new.fence, new.record.attempt, new.desk) == (2, 2, "reviewer")
    with pytest.raises(Fenced, match="fenced out") as raised:
        store.renew(old)
    assert raised.value.code == 4
    with pytest.raises(Fenced):
        store.release(old)
    with pytest.raises(Fenced):
        store.ensure_owner(old)
    thief.ensure_owner(new)


def _at(record: ClaimRecord, seconds: float) -> datetime:
    return datetime.fromisoformat(record.renewed_at.replace("Z", "+00:00")) + timedelta(
        seconds=seconds
    )


def test_release_then_reacquire_is_fence_plus_one(backend: RecordBackend) -> None:
    store = ClaimStore(backend)
    first = store.acquire("b1", "coder", lease_s=60)
    store.release(first)
    assert store.get("b1").state == "released"  # type: ignore[union-attr]
    second = store.acquire("b1", "coder", lease_s=60)
    assert (second.fence, second.record.attempt) == (2, 2)
    assert second.holder != first.holder


def test_a_done_brief_is_not_claimable(backend: RecordBackend) -> None:
    store = ClaimStore(backend, clock=lambda: _later(10_000))
    claim = store.acquire("b1", "coder", lease_s=1)
    store.release(claim, done=True)
    with pytest.raises(Busy, match="is done"):
        store.acquire("b1", "other", lease_s=60, allow_waiting=True)
    assert store.get("b1").state == "done"  # type: ignore[union-attr]


def test_waiting_holds_no_lease_and_only_a_waker_resumes_it(backend: RecordBackend) -> None:
    store = ClaimStore(backend)
    claim = store.acquire("b1", "coder", lease_s=1)
    store.set_waiting(claim, "approval")
    far = ClaimStore(backend, clock=lambda: _later(10_000))
    record = far.get("b1")
    assert record is not None and far.status(record) == "waiting"
    with pytest.raises(Busy, match="waiting for approval"):
        far.acquire("b1", "other", lease_s=60)
    woken = far.acquire("b1", "coder", lease_s=60, allow_waiting=True)
    assert (woken.fence, woken.record.attempt, woken.record.waiting_for) == (2, 1, None)


def test_stuck_needs_an_expired_lease_and_is_then_claimable(backend: RecordBackend) -> None:
    store = ClaimStore(backend)
    claim = store.acquire("b1", "coder", lease_s=5)
    live = store.get("b1")
    assert live is not None
    with pytest.raises(Busy):
        store.mark_stuck(live, by="stuck-claims", note="no heartbeat")
    sweeper = ClaimStore(backend, clock=lambda: _later(100))
    stuck = sweeper.mark_stuck(live, by="stuck-claims", note="no heartbeat")
    assert stuck.state == "stuck" and "stuck-claims" in stuck.note
    with pytest.raises(Busy, match="changed"):
        sweeper.mark_stuck(live, by="stuck-claims", note="again")
    with pytest.raises(Fenced):
        store.renew(claim)
    resumed = store.acquire("b1", "coder", lease_s=5)
    assert resumed.fence == 2


def test_renew_moves_renewed_at_and_anchors_the_journal_head(backend: RecordBackend) -> None:
    ticks = iter([now_utc(), _later(1), _later(2)])
    store = ClaimStore(backend, clock=lambda: next(ticks))
    claim = store.acquire("b1", "coder", lease_s=60)
    before = claim.record.renewed_at
    store.renew(claim, journal_head="sha256:" + "ab" * 32)
    record = store.get("b1")
    assert record is not None and record.renewed_at > before
    assert record.journal_head == "sha256:" + "ab" * 32 and record.sha == claim.sha


def test_list_reads_every_claim_and_reports_corrupt_ones(backend: RecordBackend) -> None:
    store = ClaimStore(backend)
    for brief in ("a", "b", "c"):
        store.acquire(brief, "coder", lease_s=60)
    assert [r.brief for r in store.list()] == ["a", "b", "c"]
    tip = backend.refresh(["refs/assay/claims/b"])["refs/assay/claims/b"]
    bad = backend.commit(
        {"claim.json": b'{"v": 1, "brief": "b"}'},
        parents=[tip],
        message="edited by hand",
        author=Identity("someone", "s@x"),
    )
    assert backend.push([RefUpdate("refs/assay/claims/b", bad, expected=tip)]).ok
    records, broken = store.scan()
    assert [r.brief for r in records] == ["a", "c"]
    assert len(broken) == 1 and "refs/assay/claims/b" in broken[0].message
    with pytest.raises(Corrupt, match="refs/assay/claims/b"):
        store.list()
    with pytest.raises(Corrupt, match="missing"):
        store.get("b")


def test_claim_commits_name_the_desk_and_holder(forge: Forge) -> None:
    claim = ClaimStore(forge).acquire("b1", "coder", lease_s=60)
    assert forge.read_blob(claim.sha, "claim.json") is not None
    author = subprocess.run(
        ["git", f"--git-dir={forge.state_dir}", "log", "-1", "--format=%an <%ae>", claim.sha],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert author == f"coder <{claim.holder}@coder.assay.invalid>"


def test_bad_ids_and_leases_are_bad_input(forge: Forge) -> None:
    store = ClaimStore(forge)
    for brief in ("../x", "a/b", "x" * 101, "bad\nid", ".hidden"):
        with pytest.raises(BadInput):
            store.acquire(brief, "coder", lease_s=60)
    with pytest.raises(BadInput):
        store.acquire("b1", "co/der", lease_s=60)
    with pytest.raises(BadInput):
        store.acquire("b1", "coder", lease_s=0)
    assert forge.ls_refs("refs/assay/") == {}


def test_skew_comes_from_the_flag_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSAY_CLAIM_SKEW", raising=False)
    assert skew_from_env() == 30
    monkeypatch.setenv("ASSAY_CLAIM_SKEW", "2.5")
    assert skew_from_env() == 2.5 and skew_from_env(0) == 0
    monkeypatch.setenv("ASSAY_CLAIM_SKEW", "soon")
    with pytest.raises(BadInput, match="ASSAY_CLAIM_SKEW"):
        skew_from_env()
    with pytest.raises(BadInput):
        skew_from_env(-1)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"v": 2}, "'v'"),
        ({"state": "lost"}, "'state'"),
        ({"fence": "3"}, "'fence'"),
        ({"fence": True}, "'fence'"),
        ({"fence": 0}, "'fence'"),
        ({"lease_s": -1}, "lease_s"),
        ({"renewed_at": "yesterday"}, "renewed_at"),
        ({"brief": "../x"}, "brief"),
        ({"extra": 1}, "unknown"),
    ],
)
def test_record_validation_names_the_field(change: dict[str, object], words: str) -> None:
    good = ClaimRecord(
        brief="b1",
        desk="coder",
        holder="h",
        fence=1,
        state="held",
        since=format_time(now_utc()),
        renewed_at=format_time(now_utc()),
        lease_s=60,
    ).to_json()
    assert validate(good).brief == "b1"
    with pytest.raises(ValueError, match=words):
        validate({**good, **change})


def test_heartbeat_renews_every_third_of_the_lease(forge: Forge) -> None:
    store = ClaimStore(forge)
    claim = store.acquire("b1", "coder", lease_s=0.6)
    heads = iter(f"sha256:{n:064x}" for n in range(1000))
    with Heartbeat(store, claim, on_fenced=lambda: None, journal_head=lambda: next(heads)) as hb:
        assert hb.interval_s == pytest.approx(0.2)
        wait_until(lambda: hb.renewals >= 3, timeout=30, what="three renewals")
    final = hb.stop()
    record = store.get("b1")
    assert record is not None and record.sha == final.sha
    assert record.journal_head is not None and not hb.fenced


def test_heartbeat_calls_on_fenced_the_moment_it_is_fenced(forge: Forge) -> None:
    store = ClaimStore(forge)
    claim = store.acquire("b1", "coder", lease_s=0.6)
    fenced = threading.Event()
    hb = Heartbeat(store, claim, on_fenced=fenced.set).start()
    wait_until(lambda: hb.renewals >= 1, what="a first renewal")
    with open_forge(forge.url) as elsewhere:
        thief = ClaimStore(elsewhere, clock=lambda: _later(1000))

        def steal() -> bool:
            try:
                thief.acquire("b1", "thief", lease_s=60)
            except Busy as lost:  # the heartbeat renewed between our read and our push
                assert "another writer moved it since it was read" in lost.message
                return False
            return True

        wait_until(steal, what="the thief to win over the heartbeat")
    assert fenced.wait(timeout=30)
    wait_until(lambda: not hb.running, what="the heartbeat to stop")
    assert hb.fenced
    record = store.get("b1")
    assert record is not None and record.desk == "thief" and record.fence == 2


def test_a_claim_is_one_shared_handle(backend: RecordBackend) -> None:
    store = ClaimStore(backend)
    claim = store.acquire("b1", "coder", lease_s=60)
    same = store.renew(claim)
    assert same is claim and isinstance(same, Claim)
    store.release(claim)  # from the sha the renewal left, not the acquisition's
    assert store.get("b1").state == "released"  # type: ignore[union-attr]
