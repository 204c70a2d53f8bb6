"""Claims on the forge: acquire, renew, release, waiting, done, stuck (DESIGN §5).

Each brief has one ref, ``refs/assay/claims/<brief>``; each transition is one commit
pushed as a compare-and-swap, so git's ref lock on the server picks exactly one winner
among simultaneous writers. A holder's operations go from the sha it last wrote: when the
push is refused the holder has been fenced out (``Fenced``, exit 4), and nothing is
retried, because a lost race is an answer, not a transient failure.

Acquire reads the claim, decides, and pushes once with a lease on what it read: a brief
nobody has claimed is created with a lease of "must not exist"; a record that may be taken
over (released, stuck, or held past its lease) gets a child commit at ``fence + 1``; a
brief that is busy (held and live, waiting, done) is ``Busy`` (exit 3) with no push. A
loser of the race hears it from the push's refusal and is ``Busy`` too.
"""

from __future__ import annotations

import builtins
import shlex
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from assay.claims.record import (
    CLAIM_FILE,
    CLAIMS_PREFIX,
    ClaimCodec,
    ClaimRecord,
    State,
    check_lease,
    claim_ref,
    format_time,
    now_utc,
    parse_record,
    skew_from_env,
    workflow_run_from_env,
)
from assay.errors import AssayError, BadInput, Busy, Corrupt, Fenced
from assay.forge.records import (
    LostRace,
    OnLost,
    RecordBackend,
    Stage,
    WritePolicy,
    Written,
    refuse_on_loss,
    write,
)
from assay.ids import check_id
from assay.plumbing import Identity, PushResult, RefUpdate
from assay.states import CLAIM_STATES, claim_takeable

Clock = Callable[[], datetime]


def new_holder_token() -> str:
    """A fresh, unguessable holder token."""
    return uuid.uuid4().hex


class Claim:
    """A claim this process holds: the record it last wrote, and that commit's sha.

    The object is shared by the run and its :class:`~assay.claims.Heartbeat`; every store
    operation on it holds ``lock`` and updates it in place, so neither thread ever pushes
    from a sha the other has already replaced.
    """

    def __init__(self, record: ClaimRecord) -> None:
        self._record = record
        self.lock = threading.RLock()

    def __repr__(self) -> str:
        r = self._record
        return f"Claim({r.brief!r}, desk={r.desk!r}, fence={r.fence}, state={r.state!r})"

    @property
    def record(self) -> ClaimRecord:
        return self._record

    @property
    def sha(self) -> str:
        return self._record.sha

    @property
    def brief(self) -> str:
        return self._record.brief

    @property
    def desk(self) -> str:
        return self._record.desk

    @property
    def holder(self) -> str:
        return self._record.holder

    @property
    def fence(self) -> int:
        return self._record.fence

    @property
    def lease_s(self) -> float:
        return self._record.lease_s

    def _set(self, record: ClaimRecord) -> None:
        self._record = record


class _Unseen:
    def __repr__(self) -> str:
        return "UNSEEN"


UNSEEN = _Unseen()
"""``acquire(seen=...)`` default: nothing was read before, so acquire reads when it must."""


class ClaimStore:
    """Claims of one forge. ``skew_s`` defaults to ``ASSAY_CLAIM_SKEW`` or 30 s.

    ``clock`` stands in for the wall clock (tests judge expiry without waiting).
    """

    def __init__(
        self, forge: RecordBackend, *, skew_s: float | None = None, clock: Clock = now_utc
    ) -> None:
        self.forge = forge
        self.skew_s = skew_from_env(skew_s)
        self.clock = clock

    # ------------------------------------------------------------------ reading

    def get(self, brief: str) -> ClaimRecord | None:
        """The current record of ``brief`` (one fetch), or None when never claimed."""
        ref = claim_ref(brief)
        sha = self.forge.refresh([ref]).get(ref)
        if sha is None:
            return None
        return parse_record(self.forge.read_blob(sha, CLAIM_FILE), ref=ref, sha=sha)

    def scan(
        self, *, fetched: dict[str, str] | None = None
    ) -> tuple[list[ClaimRecord], list[Corrupt]]:
        """Every claim in one fetch: the valid records and a Corrupt error per bad one.

        ``fetched``: the ``{ref: sha}`` answer of a fetch the caller already made that
        included ``refs/assay/claims/`` (the desk's view fetches everything at once).
        """
        if fetched is None:
            refs = self.forge.refresh(CLAIMS_PREFIX)
        else:
            refs = {ref: sha for ref, sha in fetched.items() if ref.startswith(CLAIMS_PREFIX)}
        names = sorted(refs)
        blobs = self.forge.read_blobs([(refs[name], CLAIM_FILE) for name in names])
        records: list[ClaimRecord] = []
        broken: list[Corrupt] = []
        for name, blob in zip(names, blobs, strict=True):
            try:
                records.append(parse_record(blob, ref=name, sha=refs[name]))
            except Corrupt as exc:
                broken.append(exc)
        return records, broken

    def list(self) -> list[ClaimRecord]:
        """Every claim in one fetch; raises the first ``Corrupt`` record found."""
        records, broken = self.scan()
        if broken:
            raise broken[0]
        return records

    def status(self, record: ClaimRecord) -> str:
        """``held`` turns ``expired`` past ``renewed_at + lease_s + skew``."""
        return record.status(skew_s=self.skew_s, now=self.clock())

    # ------------------------------------------------------------------ writing

    def _stage(
        self,
        stage: Stage,
        record: ClaimRecord,
        *,
        on: str | None,
        message: str,
        author: Identity | None = None,
    ) -> ClaimRecord:
        """``record`` committed on claim commit ``on`` (None: the first) and staged, encoded
        by the claim codec; returned with its new commit as ``sha``."""
        staged = stage.record(
            ClaimCodec(record.brief),
            record,
            on=on,
            author=author or Identity.for_holder(record.desk, record.holder),
            message=message,
        )
        return record.evolve(sha=staged.commit)

    def _push(self, stage: Stage, on_lost: OnLost, *, refused_is_lost: bool = False) -> Written:
        """The records layer's writer, under a claim's lost-race rule: one attempt and never
        a retry, since a lost race is an answer (``on_lost`` says the loser's: ``Busy`` to
        an acquirer, ``Fenced`` to a holder)."""
        policy = WritePolicy(
            attempts=1, what="claim push", on_lost=on_lost, refused_is_lost=refused_is_lost
        )
        return write(self.forge, lambda _again: stage, policy=policy)

    def acquire(
        self,
        brief: str,
        desk: str,
        *,
        lease_s: float,
        holder: str | None = None,
        allow_waiting: bool = False,
        seen: ClaimRecord | _Unseen | None = UNSEEN,
        also: Sequence[RefUpdate] = (),
        reclaim: bool = False,
    ) -> Claim:
        """Take ``brief`` for ``desk``; ``Busy`` when a live holder (or done) has it.

        ``allow_waiting`` lets a waker resume a waiting claim (same attempt, fence + 1).
        ``reclaim``: the caller holds ``holder``'s local lock (``assay.desks.host.holders``),
        so a claim still held under that same token is a dead process's and is taken over
        at once (fence + 1) rather than after its lease.

        ``seen``: the record (or None: no claim) a read the caller just made found, such as
        the desk loop's view; by default acquire reads it itself. The claim is decided from
        it and written in ONE push with a lease on exactly what was seen; a loser learns
        from the refusal alone that another writer moved the ref since, and answers
        ``Busy`` without another round trip. ``also`` rides in that push atomically (the
        loop asserts the branch tip it will check out).
        """
        check_id(brief)
        check_id(desk, what="desk name")
        lease_s = check_lease(lease_s)
        holder = holder or new_holder_token()
        stamp = format_time(self.clock())
        fresh = ClaimRecord(
            brief=brief,
            desk=desk,
            holder=holder,
            fence=1,
            state="held",
            since=stamp,
            renewed_at=stamp,
            lease_s=float(lease_s),
            workflow_run=workflow_run_from_env(),
        )
        message = f"claim {brief}: acquired by {desk}"
        if isinstance(seen, _Unseen):
            # Read first (one ls-refs; a fetch only when the claim exists), then push once
            # with a lease on what was read: a loser of the race learns it from the refusal
            # and answers Busy with no second round trip, and a live claim is refused
            # without a push at all.
            seen = self.get(brief)
        return self._acquire_seen(
            fresh, seen, message, allow_waiting=allow_waiting, also=also, reclaim=reclaim
        )

    def _successor(
        self,
        fresh: ClaimRecord,
        current: ClaimRecord,
        message: str,
        *,
        allow_waiting: bool,
        reclaim: bool = False,
    ) -> tuple[ClaimRecord, str]:
        """The record (and commit message) that takes over ``current`` when it may be
        taken: fence + 1, a new attempt unless a waiting run resumes; else ``Busy``."""
        dead_holder = reclaim and current.holder == fresh.holder and current.state == "held"
        if not dead_holder:
            self._check_claimable(current, allow_waiting=allow_waiting)
        resumed = current.state == "waiting"
        taken = fresh.evolve(
            fence=current.fence + 1,
            attempt=current.attempt if resumed else current.attempt + 1,
            journal_head=current.journal_head,
        )
        return taken, f"{message} (fence {taken.fence}, was {current.state})"

    def _acquire_seen(
        self,
        fresh: ClaimRecord,
        seen: ClaimRecord | None,
        message: str,
        *,
        allow_waiting: bool,
        also: Sequence[RefUpdate],
        reclaim: bool = False,
    ) -> Claim:
        if seen is None:
            record, text = fresh, f"{message} (fence 1)"
        else:
            record, text = self._successor(
                fresh, seen, message, allow_waiting=allow_waiting, reclaim=reclaim
            )
        stage = Stage(self.forge)
        taken = self._stage(stage, record, on=seen.sha if seen is not None else None, message=text)
        for update in also:
            stage.add(update)

        def lost(_result: PushResult) -> AssayError:
            if seen is not None:
                return self._busy(seen, lost="another writer moved it since it was read")
            return Busy(
                f"brief {fresh.brief} was just claimed by another desk first",
                status="held",
                raced=True,
            )

        self._push(stage, refuse_on_loss(lost))
        return Claim(taken)

    def _check_claimable(self, current: ClaimRecord, *, allow_waiting: bool) -> None:
        expired = current.expired(skew_s=self.skew_s, now=self.clock())
        if not claim_takeable(current.state, expired=expired, wake=allow_waiting):
            raise self._busy(current)

    def _busy(self, current: ClaimRecord, *, lost: str | None = None) -> Busy:
        now = self.clock()
        status = current.status(skew_s=self.skew_s, now=now)
        if status == "done":
            text = f"brief {current.brief} is done (fence {current.fence}); it is not claimable"
        elif status == "waiting":
            text = (
                f"brief {current.brief} is waiting for {current.waiting_for or 'an event'} "
                f"(desk {current.desk}, fence {current.fence})"
            )
        else:
            text = self.held_note(current)
        if lost:
            text += f"; {lost}"
        # raced: the brief was claimable when read and another writer got there first
        return Busy(text, claim=current.to_json(), status=status, raced=lost is not None)

    def held_note(self, record: ClaimRecord) -> str:
        """Who holds ``record``'s brief, until when, and how it is taken back sooner: its
        holder restarted on its machine (the holder lock proves the old process dead), or
        the claim released with the holder's token."""
        now = self.clock()
        status = record.status(skew_s=self.skew_s, now=now)
        deadline = record.expires_at(skew_s=self.skew_s)
        left = max((deadline - now).total_seconds(), 0.0) if deadline else 0.0
        until = deadline.strftime("%Y-%m-%dT%H:%M:%SZ") if deadline else "?"
        forge = getattr(self.forge, "display_url", "") or ""
        release = shlex.join(
            ["assay", "claim", "release", record.brief, "--holder", record.holder]
            + (["--forge", forge] if forge else [])
        )
        return (
            f"brief {record.brief} is {status} by desk {record.desk} (holder "
            f"{record.holder!r}, fence {record.fence}) until {until} (lease {record.lease_s:g} s "
            f"+ skew {self.skew_s:g} s, renewed {record.lease_age(now):.0f} s ago, "
            f"{left:.0f} s left); if that process is gone, its desk restarted with "
            f"--holder {shlex.quote(record.holder)} on its machine takes the brief back at "
            f"once, or release the claim: {release}"
        )

    def _holder_push(self, claim: Claim, changes: dict[str, Any], message: str) -> Claim:
        with claim.lock:
            stage = Stage(self.forge)
            record = self._stage(
                stage, claim.record.evolve(**changes), on=claim.sha, message=message
            )
            self._push(stage, refuse_on_loss(lambda _result: self._fenced(claim)))
            claim._set(record)
            return claim

    def settle(
        self,
        claim: Claim,
        changes: dict[str, Any],
        message: str,
        *,
        beside: Stage | None = None,
    ) -> bool:
        """Push the holder's next record, with ``beside``'s staged updates (the review
        record) in the same atomic push: True when it landed; ``Fenced`` when the claim had
        moved; False when only a sibling ref refused, so nothing landed."""
        with claim.lock:
            stage = beside if beside is not None else Stage(self.forge)
            record = self._stage(
                stage, claim.record.evolve(**changes), on=claim.sha, message=message
            )

            def on_lost(result: PushResult) -> LostRace:
                if result.refs.get(record.ref, result.outcome).lost:
                    raise self._fenced(claim)
                return LostRace.GIVE_BACK

            if not self._push(stage, on_lost, refused_is_lost=True).ok:
                return False
            claim._set(record)
            return True

    @staticmethod
    def release_changes(*, done: bool, note: str, now: str) -> dict[str, Any]:
        state: State = "done" if done else "released"
        return {"state": state, "renewed_at": now, "waiting_for": None, "note": note}

    @staticmethod
    def waiting_changes(waiting_for: str, *, now: str) -> dict[str, Any]:
        if not waiting_for:
            raise BadInput("waiting_for must name the event or timer")
        return {"state": "waiting", "waiting_for": waiting_for, "renewed_at": now}

    def now(self) -> str:
        """The store's clock as a record's time stamp."""
        return format_time(self.clock())

    def _fenced(self, claim: Claim) -> Fenced:
        text = (
            f"claim {claim.brief}: holder {claim.holder[:12]} (fence {claim.fence}) was fenced out"
        )
        try:
            current = self.get(claim.brief)
        except AssayError:
            current = None
        if current is not None:
            text += f"; now {current.state} by desk {current.desk} at fence {current.fence}"
        return Fenced(text, brief=claim.brief, fence=claim.fence)

    def renew(
        self, claim: Claim, *, journal_head: str | None = None, calls: int | None = None
    ) -> Claim:
        """Push a fresh ``renewed_at`` from the holder's last sha; ``Fenced`` if superseded.

        ``calls``: the model calls the holder's local journal holds now (the record's
        ``calls``), so a successor knows what a lost machine had paid for."""
        changes = self.renew_changes(now=self.now(), journal_head=journal_head, calls=calls)
        return self._holder_push(claim, changes, f"claim {claim.brief}: renewed")

    def stage_next(
        self, stage: Stage, claim: Claim, changes: dict[str, Any], message: str
    ) -> ClaimRecord:
        """The holder's next record staged on its last commit, not pushed (a desk's renewal
        rides in its host's group push); ``landed`` applies it once that push landed."""
        return self._stage(stage, claim.record.evolve(**changes), on=claim.sha, message=message)

    @staticmethod
    def landed(claim: Claim, record: ClaimRecord) -> None:
        """Take ``record`` (from ``stage_next``) as the claim's: its push landed."""
        with claim.lock:
            claim._set(record)

    @staticmethod
    def renew_changes(
        *, now: str, journal_head: str | None = None, calls: int | None = None
    ) -> dict[str, Any]:
        """A renewal's changes (a desk's ride in its group's next push prepares them)."""
        changes: dict[str, Any] = {"renewed_at": now}
        if journal_head is not None:
            changes["journal_head"] = journal_head
        if calls is not None:
            changes["calls"] = calls
        return changes

    def release(self, claim: Claim, *, done: bool = False, note: str = "") -> None:
        """Give the brief back (``released``) or close it (``done``: never claimable again)."""
        changes = self.release_changes(done=done, note=note, now=self.now())
        self._holder_push(
            claim, changes, f"claim {claim.brief}: {changes['state']} by {claim.desk}"
        )

    def set_waiting(self, claim: Claim, waiting_for: str) -> Claim:
        """Mark the claim ``waiting`` (no process runs, no lease clock) for an event."""
        changes = self.waiting_changes(waiting_for, now=self.now())
        return self._holder_push(claim, changes, f"claim {claim.brief}: waiting for {waiting_for}")

    def adopt(self, brief: str, holder: str) -> Claim:
        """The claim of ``brief`` as held by token ``holder`` (for ``renew``/``release``
        from another process); ``Fenced`` when that token no longer holds it."""
        current = self.get(brief)
        if current is None or current.holder != holder or not CLAIM_STATES[current.state].holds:
            what = "nobody" if current is None else f"{current.state} by desk {current.desk}"
            raise Fenced(
                f"claim {brief}: holder {holder[:12]} does not hold it (it is {what}"
                + (f" at fence {current.fence})" if current else ")"),
                brief=brief,
            )
        return Claim(current)

    def ensure_owner(self, claim: Claim) -> None:
        """Re-read the claim; ``Fenced`` unless this holder still holds it at its fence.

        Transport failures propagate (``ForgeUnavailable``), so an effect fails closed.
        """
        current = self.get(claim.brief)
        if (
            current is None
            or current.holder != claim.holder
            or current.fence != claim.fence
            or not CLAIM_STATES[current.state].holds
        ):
            raise self._fenced(claim)

    def mark_stuck(
        self, record: ClaimRecord, *, by: str, note: str, require_expired: bool = True
    ) -> ClaimRecord:
        """Sweeper: mark an expired held claim ``stuck`` (claimable again, fence + 1 on take).

        ``Busy`` when the claim is live, or when it changed since ``record`` was read.
        """
        (stuck,) = self.mark_stuck_batch([(record, note)], by=by, require_expired=require_expired)
        return stuck

    def stage_stuck(self, stage: Stage, record: ClaimRecord, *, by: str, note: str) -> ClaimRecord:
        """The stuck record ``mark_stuck`` pushes, staged on ``record``'s commit and authored
        by the sweeper (its ``sha`` is the new commit)."""
        check_id(by, what="sweeper name")
        stuck = record.evolve(state="stuck", note=f"{by}: {note}" if note else by)
        return self._stage(
            stage,
            stuck,
            on=record.sha,
            message=f"claim {record.brief}: stuck ({by})",
            author=Identity(name=by, email=f"{by}@sweep.assay.invalid"),
        )

    def mark_stuck_batch(
        self,
        items: Sequence[tuple[ClaimRecord, str]],
        *,
        by: str,
        stage: Stage | None = None,
        require_expired: bool = True,
    ) -> builtins.list[ClaimRecord]:
        """Mark every ``(record, note)`` stuck in ONE atomic push, with what ``stage``
        already holds beside them.

        ``stage`` carries what must land with the claims (a sweep's status records, its log
        entry, the refs it deletes): everything lands, or nothing does, so a crash or a lost
        race never leaves a claim marked without its record. ``Busy`` (nothing written) when
        a claim is live or changed since it was read, or another staged ref moved.
        """
        stage = stage if stage is not None else Stage(self.forge)
        marked: builtins.list[ClaimRecord] = []
        for record, note in items:
            if record.state != "held" or (
                require_expired and not record.expired(skew_s=self.skew_s, now=self.clock())
            ):
                raise self._busy(record)
            marked.append(self.stage_stuck(stage, record, by=by, note=note))

        def lost(result: PushResult) -> AssayError:
            moved = sorted(ref for ref, outcome in result.refs.items() if outcome.lost)
            return Busy(
                f"{by}: nothing marked stuck: {', '.join(moved) or 'a ref'} changed since "
                "it was read",
                refs=moved,
            )

        self._push(stage, refuse_on_loss(lost))
        return marked
