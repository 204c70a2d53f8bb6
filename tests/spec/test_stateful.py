"""The real claims, branch sync and runtime, held to the model's invariants (docs/spec/).

Hypothesis drives ``ClaimStore``, ``BranchSync`` and the durable ``Run`` against a real bare
repository with the actions of ``docs/spec/claims.pml``: acquire (and wake), the takeover
entry, renew, journal steps, effects (optionally with another desk stealing the claim inside
the re-check window), suspend, release, done, crash, pause past the lease and resume, the
sweeper, and time passing. Every desk reads a clock of its own, offset from true time by up
to ``SKEW_S`` (``ClaimStore``'s injectable clock), while the stores allow ``ALLOW_S``.

After every step the model's invariants are checked against the forge's own refs:

1. at most one live holder per brief, and a live holder is the one its claim ref names;
2. the fences of the entries on a brief's branch never go down, the branch only moves
   forward, and a holder that was fenced lands nothing afterwards;
3. an effect made after a newer fence was issued passed its ownership re-check before
   that fence was issued, and every effect at one journal position carries one
   idempotency key (so downstream deduplication covers the window);
4. a ``done`` brief is never claimed again and its claim ref never changes again;
5. a claim ref's fence never goes down and the ref only moves forward.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from assay.branch import BranchSync, branch_ref
from assay.claims import Claim, ClaimStore
from assay.claims.record import CLAIM_FILE, claim_ref
from assay.errors import Busy, Fenced
from assay.forge import Forge, init_forge, open_forge
from assay.journal import read_journal
from assay.plumbing import Identity
from assay.refs import journal_ref
from assay.runtime import Event, Run

LEASE_S = 10
SKEW_S = 2  # true bound on how far two desks' clocks differ
ALLOW_S = 2  # the stores' skew allowance: ALLOW_S >= SKEW_S is the model's assumption
DESKS = ("d0", "d1", "d2")
BRIEFS = ("b0", "b1")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
# Time passes in steps short of a lease, about a lease, and past every reader's expiry.
TICKS = (1, 4, LEASE_S, LEASE_S + ALLOW_S + SKEW_S + 1)

MIN_STEPS = 300
STEPS_RUN: list[str] = []  # every rule that ran, across all examples


def git(bare: Path, *args: str) -> bytes:
    done = subprocess.run(
        ["git", "--git-dir", str(bare), *args], capture_output=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr.decode()}")
    return done.stdout


@dataclass
class Effect:
    """One effect as the outside world saw it."""

    brief: str
    desk: str
    fence: int
    pos: int
    key: str
    issued_at_effect: int
    issued_at_check: int | None


@dataclass(repr=False)
class Desk:
    """One desk's process: everything here is lost in a crash."""

    name: str
    offset: int
    forge: Forge
    store: ClaimStore
    root: Path
    claim: Claim | None = None
    stamp: datetime | None = None  # true time of the last successful acquire or renew
    sync: BranchSync | None = None
    run: Run | None = None
    phase: str = "idle"  # idle -> take -> work
    cursor: int = 0  # program positions this run has gone through
    paused: bool = False
    checked_issued: int | None = None  # issued fence when ensure_owner last passed

    def __repr__(self) -> str:
        return self.name

    @property
    def brief(self) -> str:
        assert self.claim is not None
        return self.claim.brief

    def forget(self) -> None:
        if self.run is not None:
            self.run.close()
        self.claim = self.stamp = self.sync = self.run = None
        self.phase, self.cursor, self.paused, self.checked_issued = "idle", 0, False, None


class Hooks:
    """What the desk loop gives a run: CAS-pushed durability points and ownership checks."""

    def __init__(self, machine: ClaimProtocol, desk: Desk) -> None:
        self.machine = machine
        self.desk = desk

    def durability_point(self, reason: str) -> None:
        assert self.desk.sync is not None
        self.desk.sync.sync(f"journal: {reason}")

    def heartbeat(self, progress: dict[str, Any]) -> None:
        self.machine.renew_desk(self.desk)

    def ensure_owner(self) -> None:
        assert self.desk.claim is not None
        self.desk.store.ensure_owner(self.desk.claim)
        self.desk.checked_issued = self.machine.issued[self.desk.brief]

    def events(self) -> list[Event]:
        return []


@dataclass
class Truth:
    """What the bare repository says, read straight from it."""

    claim_sha: dict[str, str] = field(default_factory=dict)
    claim_fence: dict[str, int] = field(default_factory=dict)
    branch_tip: dict[str, str] = field(default_factory=dict)
    entries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class ClaimProtocol(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="assay-spec-"))
        self.bare = init_forge(self.tmp / "forge.git")
        self.now = EPOCH
        self.desks: list[Desk] = []
        self.sweeper: ClaimStore | None = None
        self.forges: list[Forge] = []
        self.issued = {b: 0 for b in BRIEFS}  # highest fence ever issued per brief
        self.done_sha: dict[str, str] = {}
        self.fenced_counts: dict[tuple[str, int], int] = {}  # entries when that fence stopped
        self.effects: list[Effect] = []
        self.script: dict[str, dict[int, str]] = {b: {} for b in BRIEFS}  # pos -> kind
        self.seen = Truth()

    def clock(self, offset: int) -> Callable[[], datetime]:
        return lambda: self.now + timedelta(seconds=offset)

    def open_store(self, name: str, offset: int) -> tuple[Forge, ClaimStore]:
        forge = open_forge(str(self.bare), cache_dir=self.tmp / f"cache-{name}")
        self.forges.append(forge)
        return forge, ClaimStore(forge, skew_s=ALLOW_S, clock=self.clock(offset))

    @initialize(offsets=st.lists(st.integers(0, SKEW_S), min_size=4, max_size=4))
    def start(self, offsets: list[int]) -> None:
        for name, offset in zip(DESKS, offsets, strict=False):
            forge, store = self.open_store(name, offset)
            self.desks.append(Desk(name, offset, forge, store, self.tmp / name))
        self.sweeper = self.open_store("sweeper", offsets[-1])[1]

    def teardown(self) -> None:
        try:
            for desk in self.desks:
                desk.forget()
            if self.desks:
                self.check_chains()
        finally:
            for forge in self.forges:
                forge.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def step(self, what: str) -> None:
        STEPS_RUN.append(what)

    def live(self, desk: Desk) -> bool:
        """Believes it holds its brief, and by its own clock the lease still runs."""
        if desk.claim is None or desk.stamp is None:
            return False
        return (self.now - desk.stamp).total_seconds() <= LEASE_S

    def stop(self, desk: Desk) -> None:
        """The desk was fenced: it stops, and from now on nothing of its fence may land."""
        assert desk.claim is not None
        key = (desk.brief, desk.claim.fence)
        self.fenced_counts[key] = self.count_entries(desk.brief, desk.claim.fence)
        desk.forget()

    def count_entries(self, brief: str, fence: int) -> int:
        return sum(1 for e in self.seen.entries.get(brief, []) if e.get("fence") == fence)

    def acquire_for(self, desk: Desk, brief: str, *, wake: bool) -> bool:
        try:
            claim = desk.store.acquire(brief, desk.name, lease_s=LEASE_S, allow_waiting=wake)
        except Busy:
            return False
        assert brief not in self.done_sha, f"{brief} is done, yet {desk.name} claimed it again"
        assert claim.fence > self.issued[brief], (claim.fence, self.issued[brief])
        self.issued[brief] = claim.fence
        desk.claim, desk.stamp, desk.phase = claim, self.now, "take"
        desk.sync = BranchSync(
            desk.forge,
            brief,
            workdir=desk.root / brief,
            identity=Identity.for_holder(desk.name, claim.holder),
        )
        desk.sync.checkout()  # the tip is fetched right after the claim
        return True

    def renew_desk(self, desk: Desk) -> None:
        assert desk.claim is not None
        try:
            desk.store.renew(desk.claim)
        except Fenced:
            self.stop(desk)
            return
        desk.stamp = self.now

    def pause_past_lease(self, desk: Desk) -> None:
        """The desk stops while time runs past every reader's idea of its lease."""
        desk.paused = True
        self.now += timedelta(seconds=LEASE_S + ALLOW_S + SKEW_S + 1)

    def program(self, desk: Desk, window: str, thief: int) -> None:
        """Run the desk's deterministic program up to and including its next live step.

        Position p is a tool step or an effect, as decided the first time any holder ran
        it (so later holders replay the same program)."""
        run, brief = desk.run, desk.brief
        assert run is not None
        while True:
            desk.cursor += 1
            pos = desk.cursor
            live = pos > run.history.last_pos
            kind = self.script[brief].setdefault(pos, "effect" if window else "tool")
            if kind == "tool":
                run.step(f"p{pos}", lambda pos=pos: {"pos": pos}, kind="tool")
            else:

                def effect(key: str, pos: int = pos) -> str:
                    if window in ("steal", "sweep"):
                        self.inside_window(desk, window, thief)
                    assert desk.claim is not None
                    self.effects.append(
                        Effect(
                            brief,
                            desk.name,
                            desk.claim.fence,
                            pos,
                            key,
                            self.issued[brief],
                            desk.checked_issued,
                        )
                    )
                    return key

                desk.checked_issued = None
                run.effect(f"p{pos}", effect)
            if live:
                return

    def inside_window(self, desk: Desk, window: str, thief: int) -> None:
        """Between the ownership re-check and the effect: the holder stalls past its lease
        and another desk steals the claim, or the sweeper marks it stuck."""
        others = [d for d in self.desks if d is not desk and d.claim is None]
        self.pause_past_lease(desk)
        if window == "steal" and others:
            self.acquire_for(others[thief % len(others)], desk.brief, wake=False)
        elif window == "sweep":
            assert self.sweeper is not None
            record = self.sweeper.get(desk.brief)
            if record is not None and record.state == "held":
                with contextlib.suppress(Busy):
                    self.sweeper.mark_stuck(record, by="sweeper", note="lease expired")
        desk.paused = False

    def holders(self, *, phase: str | None = None, paused: bool = False) -> list[Desk]:
        return [
            d
            for d in self.desks
            if d.claim is not None and d.paused == paused and (phase is None or d.phase == phase)
        ]

    # -------------------------------------------------------------------- rules

    # Every step is one rule that picks among the actions enabled now. (Separate rules
    # would meet Hypothesis's swarm testing, which switches most rules off per example and
    # spends whole examples on, say, 30 sweeps in a row.)
    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        actions = [name for name, enabled in self.enabled().items() if enabled]
        name = self.choose(data, actions, "action")
        getattr(self, f"do_{name}")(data)

    def choose(self, data: st.DataObject, options: list[Any], label: str) -> Any:
        """Roughly uniform among ``options`` (``sampled_from`` strongly favours the first
        entries, which starves the later actions); shrinks towards the first."""
        return options[data.draw(st.integers(0, 2**16 - 1), label=label) % len(options)]

    def enabled(self) -> dict[str, bool]:
        idle = any(d.claim is None for d in self.desks)
        return {
            "takeover": bool(self.holders(phase="take")),
            "work": bool(self.holders(phase="work")),
            "acquire": idle,
            "renew": bool(self.holders()),
            "pause": bool(self.holders()),
            "finish": bool(self.holders(phase="work")),
            "resume": bool(self.holders(paused=True)),
            "tick": True,
            "crash": bool(self.holders() or self.holders(paused=True)),
            "sweep": True,
        }

    def pick(self, data: st.DataObject, desks: list[Desk]) -> Desk:
        desk: Desk = self.choose(data, desks, "desk")
        return desk

    def do_acquire(self, data: st.DataObject) -> None:
        desk = self.pick(data, [d for d in self.desks if d.claim is None])
        brief = self.choose(data, list(BRIEFS), "brief")
        wake = data.draw(st.booleans(), label="wake")
        self.step("acquire")
        self.acquire_for(desk, brief, wake=wake)

    def do_takeover(self, data: st.DataObject) -> None:
        desk = self.pick(data, self.holders(phase="take"))
        self.step("takeover")
        assert desk.sync is not None and desk.claim is not None
        try:
            desk.run = Run.open(
                desk.sync.journal_dir, fence=desk.claim.fence, hooks=Hooks(self, desk), fsync=False
            )
        except Fenced:  # a newer fence already wrote the branch
            self.step("takeover:journal-ahead")
            self.stop(desk)
            return
        try:
            desk.sync.sync(f"takeover at fence {desk.claim.fence}")
        except Fenced:  # the tip moved since the checkout: fetch it again, retry later
            self.step("takeover:refetch")
            desk.run.close()
            desk.run = None
            desk.sync.checkout()
            return
        desk.phase, desk.cursor = "work", 0

    def do_renew(self, data: st.DataObject) -> None:
        desk = self.pick(data, self.holders())
        self.step("renew")
        self.renew_desk(desk)

    def do_work(self, data: st.DataObject) -> None:
        """The next step of the desk's program: a journal entry, or an effect and its entry
        (with, perhaps, a steal or a sweep inside the window after its re-check)."""
        desk = self.pick(data, self.holders(phase="work"))
        window = self.choose(data, ["", "effect", "steal", "sweep"], "window")
        thief = data.draw(st.integers(0, 2), label="thief")
        self.step(f"work:{window or 'tool'}")
        try:
            self.program(desk, window, thief)
        except Fenced:
            if desk.claim is not None:
                self.stop(desk)

    def do_finish(self, data: st.DataObject) -> None:
        desk = self.pick(data, self.holders(phase="work"))
        how = self.choose(data, ["waiting", "released", "done"], "how")
        self.step(f"finish:{how}")
        assert desk.claim is not None
        try:
            if how == "waiting":
                desk.store.set_waiting(desk.claim, "approval")
            else:
                desk.store.release(desk.claim, done=how == "done")
        except Fenced:
            self.stop(desk)
            return
        if how == "done":
            self.done_sha[desk.brief] = desk.claim.sha
        desk.forget()

    def do_crash(self, data: st.DataObject) -> None:
        desk = self.pick(data, self.holders() + self.holders(paused=True))
        self.step("crash")
        desk.forget()

    def do_pause(self, data: st.DataObject) -> None:
        desk = self.pick(data, self.holders())
        self.step("pause")
        if data.draw(st.booleans(), label="past lease"):
            self.pause_past_lease(desk)
        else:
            desk.paused = True

    def do_resume(self, data: st.DataObject) -> None:
        desk = self.pick(data, self.holders(paused=True))
        self.step("resume")
        desk.paused = False

    def do_tick(self, data: st.DataObject) -> None:
        self.step("tick")
        self.now += timedelta(seconds=data.draw(st.sampled_from(TICKS), label="seconds"))

    def do_sweep(self, data: st.DataObject) -> None:
        self.step("sweep")
        assert self.sweeper is not None
        expired = [
            (record, "lease expired")
            for record in self.sweeper.list()
            if record.state == "held" and self.sweeper.status(record) == "expired"
        ]
        # As `assay sweep` does: every expired claim in one atomic push, or none of them.
        with contextlib.suppress(Busy):
            self.sweeper.mark_stuck_batch(expired, by="sweeper")

    # --------------------------------------------------------------- invariants

    def read_truth(self) -> Truth:
        lines = git(
            self.bare,
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/assay/claims/",
            "refs/assay/journal/",
            "refs/heads/assay/",
        )
        refs = dict(line.split(" ", 1) for line in lines.decode().splitlines())
        truth = Truth()
        for brief in BRIEFS:
            sha = refs.get(claim_ref(brief))
            if sha is not None:
                truth.claim_sha[brief] = sha
                if sha == self.seen.claim_sha.get(brief):
                    truth.claim_fence[brief] = self.seen.claim_fence[brief]
                else:
                    record = json.loads(git(self.bare, "show", f"{sha}:{CLAIM_FILE}"))
                    truth.claim_fence[brief] = int(record["fence"])
            # The checkpoints (journal included) are on the journal ref.
            tip = refs.get(journal_ref(brief)) or refs.get(branch_ref(brief))
            if tip is not None:
                truth.branch_tip[brief] = tip
                if tip == self.seen.branch_tip.get(brief):
                    truth.entries[brief] = self.seen.entries[brief]
                else:
                    truth.entries[brief] = self.branch_entries(tip, brief)
        return truth

    def branch_entries(self, tip: str, brief: str) -> list[dict[str, Any]]:
        folder = f".assay/journal/{brief}/"
        names = git(self.bare, "ls-tree", "-r", "--name-only", tip, folder).decode().split()
        entries: list[dict[str, Any]] = []
        for name in sorted(n for n in names if n.endswith(".jsonl")):
            text = git(self.bare, "show", f"{tip}:{name}").decode()
            entries.extend(json.loads(line) for line in text.splitlines() if line.strip())
        return entries

    def forward(self, old: str | None, new: str | None) -> bool:
        if old is None or old == new:
            return True
        if new is None:
            return False
        done = subprocess.run(
            ["git", "--git-dir", str(self.bare), "merge-base", "--is-ancestor", old, new],
            capture_output=True,
            timeout=60,
            check=False,
        )
        return done.returncode == 0

    @invariant()
    def invariants(self) -> None:
        truth = self.read_truth()
        for brief in BRIEFS:
            # 5. the claim ref only moves forward and its fence never goes down
            assert self.forward(self.seen.claim_sha.get(brief), truth.claim_sha.get(brief)), (
                f"{brief}: the claim ref was rewritten, not moved forward"
            )
            assert truth.claim_fence.get(brief, 0) >= self.seen.claim_fence.get(brief, 0), (
                f"{brief}: the claim's fence went down"
            )
            # 4. a done claim never changes again
            if brief in self.done_sha:
                assert truth.claim_sha[brief] == self.done_sha[brief], f"{brief} done, then moved"
            # 1. at most one live holder, and it is the one the ref names
            live = [d for d in self.desks if d.claim and d.brief == brief and self.live(d)]
            assert len(live) <= 1, f"two live holders of {brief}: {[d.name for d in live]}"
            for desk in live:
                assert desk.claim is not None
                record = json.loads(
                    git(self.bare, "show", f"{truth.claim_sha[brief]}:{CLAIM_FILE}")
                )
                assert (record["holder"], record["fence"], record["state"]) == (
                    desk.claim.holder,
                    desk.claim.fence,
                    "held",
                ), f"live holder {desk.name} is not the one {brief}'s claim names: {record}"
            # 2. the branch only moves forward; entry fences never go down; fenced lands nothing
            assert self.forward(self.seen.branch_tip.get(brief), truth.branch_tip.get(brief)), (
                f"{brief}: the branch was rewritten, not moved forward"
            )
            fences = [int(e["fence"]) for e in truth.entries.get(brief, [])]
            assert fences == sorted(fences), f"{brief}: entry fences went down: {fences}"
            assert all(f <= self.issued[brief] for f in fences), (fences, self.issued[brief])
        self.seen = truth
        for (brief, fence), count in self.fenced_counts.items():
            landed = self.count_entries(brief, fence)
            assert landed == count, f"fenced holder of {brief} at fence {fence} landed entries"
        # 3. effects after a newer fence stay inside the re-check window; one key per position
        keys: dict[tuple[str, int], set[str]] = {}
        for effect in self.effects:
            if effect.issued_at_effect > effect.fence:
                assert effect.issued_at_check == effect.fence, (
                    f"{effect.desk} made an effect on {effect.brief} at fence {effect.fence} "
                    f"after fence {effect.issued_at_effect} was issued, outside the window"
                )
            keys.setdefault((effect.brief, effect.pos), set()).add(effect.key)
        for (brief, pos), found in keys.items():
            assert len(found) == 1, f"{brief} position {pos} ran with keys {sorted(found)}"

    def check_chains(self) -> None:
        """The journal on every branch verifies end to end (hash chain, blobs)."""
        truth = self.read_truth()
        for brief, tip in truth.branch_tip.items():
            archive = git(self.bare, "archive", "--format=tar", tip, f".assay/journal/{brief}")
            target = self.tmp / "verify" / brief
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(target, filter="data")
            journal = read_journal(target / ".assay" / "journal" / brief)
            assert [e["fence"] for e in journal.entries] == [
                e["fence"] for e in truth.entries[brief]
            ]


@pytest.mark.slow
def test_the_real_protocol_keeps_the_models_invariants() -> None:
    STEPS_RUN.clear()
    run_state_machine_as_test(
        ClaimProtocol,
        settings=settings(
            max_examples=13,
            stateful_step_count=30,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    ran = Counter(what.split(":")[0] for what in STEPS_RUN)
    assert len(STEPS_RUN) >= MIN_STEPS, f"only {len(STEPS_RUN)} steps ran: {ran}"
    # The steps moved tenures along, not only the clock.
    for what in ("acquire", "takeover", "work", "renew", "pause", "crash", "sweep"):
        assert ran[what] > 0, f"no {what} step ran: {ran}"
