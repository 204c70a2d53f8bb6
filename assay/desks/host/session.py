"""One claimed brief being run by one desk process: checkout, hooks, pusher, desk kind.

``Session.open`` checks out ``assay/<brief>`` (BranchSync; in ``window`` and ``exit`` mode
after committing what a killed process of this machine left there), builds the desk's model
and tools, starts the hooks' pusher thread, and picks the function the runtime will execute
for the desk's kind (``agent``, ``cli``, ``command`` or ``python``, wrapped by the objective
loop when the brief has one). ``DeskHooks`` is the runtime's ``RunHooks``: every durability
point is a commit of work tree plus journal, pushed by the desk's mode through the host's
group with the claim beside it (a refused push is ``Fenced``), lease renewals ride in the
host's pushes, ``ensure_owner`` re-reads the claim ref before effects, and ``events()``
reads the brief's events ref.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from assay.branch import BranchSync, journal_path
from assay.briefs import Brief
from assay.claims import Claim, ClaimRecord, ClaimStore
from assay.claims.heartbeat import DUE_AFTER, RIDES_AFTER
from assay.desks.host.durability import DeskPusher, Durability
from assay.desks.host.objectives import (
    ObjectiveLoop,
    objective_events,
    requeue_events,
    with_objective,
)
from assay.desks.kinds.agent import AgentOptions, run_agent, worktree_fingerprint
from assay.desks.kinds.command import command_desk
from assay.desks.kinds.python import in_directory
from assay.desks.kinds.tools import ToolBox
from assay.desks.records.events import EventLog
from assay.errors import AssayError, Denied, Fenced, ForgeUnavailable, Internal
from assay.forge import Forge
from assay.forge.group import UnitState
from assay.forge.records import Stage
from assay.journal import read_journal, secrets_from_env, summarize
from assay.plumbing import GitError, Identity, RefUpdate
from assay.runtime import Budget, Event
from assay.sandbox import require_sandbox
from assay.sandbox.scan import CheckpointScan

LOG = logging.getLogger("assay.desks.host.session")
GROUPED = frozenset({"tool"})  # durability points that may wait for the next push
GROUP_WINDOW_S = 5.0  # ... for at most this long


def unit_key(claim: Claim) -> str:
    """The run's unit in its host's group: one per brief, holder and fence."""
    name = f"{claim.brief}\0{claim.holder}\0{claim.fence}"
    return hashlib.sha256(name.encode()).hexdigest()[:32]


class DeskHooks:
    """``RunHooks`` for a run hosted by the desk loop on a forge.

    Every durability point is committed to the work directory's branch; the desk's
    ``Durability`` decides which are pushed at once. What is pushed goes through the host's
    group (:mod:`assay.forge.group`) as the run's *unit*: the branch and journal ref and the
    claim, one atomic CAS of all three, so a checkpoint lands only while the claim is still
    this holder's. Between its own pushes the unit rides in any push the host makes: a
    window-mode checkpoint, and the lease renewal once a third of the lease has passed (a
    background thread pushes it alone at half the lease when nothing else went).
    """

    def __init__(
        self,
        *,
        sync: BranchSync,
        store: ClaimStore,
        claim: Claim,
        events: EventLog,
        brief: Brief | None = None,
        scan: CheckpointScan | None = None,
        durability: Durability | None = None,
    ) -> None:
        self.sync = sync
        self.scan = scan
        self.refused: Denied | None = None
        self.push_refused: GitError | None = None  # a refusal that is not a lost race
        self.store = store
        self.claim = claim
        self.log = events
        self.brief = brief
        self.durability = durability or Durability()
        self.requeued: list[Event] = []
        if brief is not None and brief.objective is not None and sync.journal_dir.exists():
            self.requeued = requeue_events(read_journal(sync.journal_dir))
        self.fenced = threading.Event()
        # Events as the desk's view read them just before the claim: the run's first drain
        # uses them instead of fetching again; every later drain reads the forge.
        self.seeded: list[Event] | None = None
        self.pushes = 0  # checkpoints that reached the forge (pushed or carried)
        self.last_push = time.monotonic()
        # The journal head the forge holds, anchored by every claim renewal (DESIGN §6);
        # never a local head that a crash could still lose.
        self.pushed_head: str | None = None
        self.run: Any = None  # the Run, once executing (its model calls reach the claim)
        # Journal heads of the local checkpoints not known to be on the forge, by commit.
        self._heads: dict[str, str] = {}
        self._unpushed_since: float | None = None  # the oldest local commit not pushed
        # A renewal offered, not landed yet: its record and its update.
        self._renewal: tuple[ClaimRecord, RefUpdate] | None = None
        self._renewed = time.monotonic()  # the claim was just acquired
        self._lock = threading.RLock()  # the run thread's commits, the pusher's ticks
        self.unit = sync.forge.unit(sync.git_dir, key=unit_key(claim))
        if getattr(sync, "resumed_locally", False):
            # Checked out at local commits the forge has not seen (a restart on this
            # machine): they wait for a push like any commit of this session.
            self._remember_head()
            self._unpushed_since = time.monotonic()
        lease = claim.lease_s
        self.pusher = DeskPusher(
            tick=self._tick,
            on_fenced=self.fenced.set,
            retry_s=max(min(lease * (DUE_AFTER - RIDES_AFTER), self.durability.window_s), 0.2),
            name=f"pusher-{claim.brief}",
        )

    def durability_point(self, reason: str) -> None:
        if self.fenced.is_set():
            raise self._fenced()
        now = time.monotonic()
        if (
            self.durability.mode == "step"
            and reason in GROUPED
            and now - self.last_push < GROUP_WINDOW_S
        ):
            # Cheap steps are group-committed (DESIGN §6): a tool step rides along with
            # the next model step's push (or the timer's). Losing it to a crash costs only
            # running the tool again; a model step is always pushed before the next one.
            return
        if self.refused is not None:
            raise self.refused
        if self.push_refused is not None:
            raise self.push_refused  # the forge refused this run's push (not a lost race)
        if self.scan is not None:
            try:
                # Before every local commit too: a window's pushed history holds them all.
                self.scan.check_worktree(self.sync.workdir)
            except Denied as denied:
                self.refused = denied  # nothing of this work tree is pushed any more
                raise
        window_tool = reason == "tool" and self.durability.mode == "window"
        last_step = last_step_name(self.sync.journal_dir) if window_tool else ""
        push = self.durability.pushes(
            reason, since_push_s=now - self._last_host_push(), last_step=last_step
        )
        with self._lock:
            if self.sync.commit(f"{self.claim.brief}: {reason}") is not None:
                self._remember_head()
                if self._unpushed_since is None:
                    self._unpushed_since = now
            if push or self.durability.rides:
                self._offer(checkpoint=True)
        if push:
            self._flush()

    def _remember_head(self) -> None:
        head = last_line_sum(self.sync.journal_dir)
        if head is not None:
            self._heads[self.sync.head()] = head

    # ------------------------------------------------------------------ the unit

    def _offer(self, *, checkpoint: bool, renew: bool = False) -> None:
        """Make the unit the local checkpoint (``checkpoint``) and the claim: a renewal
        when one is due to ride (``renew``, or a third of the lease gone), else the claim
        asserted at its commit beside the checkpoint (the caller holds the lock)."""

        def build(state: UnitState) -> list[RefUpdate]:
            self._absorb(state)
            if self.fenced.is_set() or self.push_refused is not None:
                return []  # a lost or refused unit offers nothing more: the run stops
            sync = self.sync
            updates: list[RefUpdate] = []
            head = sync.head() if checkpoint else sync.checkpoint
            if checkpoint:
                code = sync.code_head()
                if head != sync.checkpoint or code != sync.tip:
                    updates = [
                        RefUpdate(sync.ref, code, expected=sync.tip),
                        RefUpdate(sync.journal_ref, head, expected=sync.checkpoint),
                    ]
            claim = self.claim
            if self._renewal is None and (renew or self._renewal_rides()):
                anchored = self._heads.get(head or "", self.pushed_head)
                changes = self.store.renew_changes(
                    now=self.store.now(), journal_head=anchored, calls=self.local_calls()
                )
                staged = Stage(self.store.forge)
                record = self.store.stage_next(
                    staged, claim, changes, f"claim {claim.brief}: renewed"
                )
                self._renewal = (record, staged.updates[0])
            if self._renewal is not None:
                updates.append(self._renewal[1])
            elif updates:
                updates.append(RefUpdate(claim.record.ref, claim.sha, expected=claim.sha))
            return updates

        self.unit.offer(build)

    def _absorb(self, state: UnitState) -> None:
        """Take in what landed of the unit (in this process's pushes or another's): the
        branch and journal bases, the pushed journal head, a renewal; a lost unit fences."""
        sync, bases = self.sync, state.bases
        if sync.ref in bases:
            sync.tip = bases[sync.ref]
        landed = bases.get(sync.journal_ref, sync.checkpoint)
        if sync.journal_ref in bases and landed != sync.checkpoint:
            sync.checkpoint = landed
            self.pushed_head = self._heads.get(landed or "", self.pushed_head)
            if landed in self._heads:  # it and every commit before it are on the forge
                order = list(self._heads)
                self._heads = {c: self._heads[c] for c in order[order.index(landed) + 1 :]}
            self.pushes += 1
            self.last_push = time.monotonic()
            # The next read of these refs here (the desk's view, the gate) starts no fetch.
            sync.forge.keep_pushed(sync.git_dir, [t for t in (sync.tip, landed) if t])
            pending = landed != sync.head()
            self._unpushed_since = time.monotonic() if pending else None
        renewal = self._renewal
        if renewal is not None and bases.get(renewal[1].ref) == renewal[1].new:
            self.store.landed(self.claim, renewal[0])
            self._renewal = None
            self._renewed = time.monotonic()
        answer = state.answer
        if answer is not None and state.pending and answer.outcome == "lost":
            self.fenced.set()  # the unit can never land: another holder moved its refs
        elif answer is not None and state.pending and answer.outcome == "refused":
            said = "; ".join(answer.errors) or ", ".join(
                f"{ref} {status}" for ref, status in answer.statuses.items()
            )
            self.push_refused = GitError(f"push of assay/{self.claim.brief} refused: {said}")

    def _flush(self) -> None:
        """Push the unit now (the host's next round, led here when none is under way)."""
        state = self.unit.flush()
        with self._lock:
            self._absorb(state)
        answer = state.answer
        if self.fenced.is_set():
            raise self._fenced()
        if self.push_refused is not None:
            raise self.push_refused
        if state.pending and answer is not None and answer.outcome == "error":
            raise ForgeUnavailable(answer.message)

    def _fenced(self) -> Fenced:
        return Fenced(
            f"push of assay/{self.claim.brief} refused: its claim, branch or journal moved "
            f"past this holder's (fence {self.claim.fence}; another holder took over)",
            brief=self.claim.brief,
        )

    def _last_host_push(self) -> float:
        """When this run's checkpoint last landed or the host last pushed, whichever is
        later (monotonic): a window counts from there, so the desks of a host push about
        once a window between them, not once each."""
        landed = self.unit.group.last_push()
        if landed is None:
            return self.last_push
        return max(self.last_push, time.monotonic() - max(time.time() - landed, 0.0))

    def _renewal_rides(self) -> bool:
        return time.monotonic() - self._renewed >= self.claim.lease_s * RIDES_AFTER

    def _tick(self) -> float:
        """The pusher's tick: offer the renewal once it may ride, push the unit when the
        renewal or a window's checkpoint is due; seconds until the next tick."""
        lease, window = self.claim.lease_s, self.durability.window_s
        with self._lock:
            if self.fenced.is_set():
                raise self._fenced()
            self._absorb(self.unit.state())
            now = time.monotonic()
            rides = self._renewal_rides()
            waiting = self.durability.rides and self._unpushed_since is not None
            if rides and self._renewal is None:
                self._offer(checkpoint=waiting, renew=True)
            due = self._renewed + lease * DUE_AFTER
            if waiting and self._unpushed_since is not None:
                oldest = max(self._unpushed_since, self._last_host_push())
                due = min(due, oldest + window)
        if now >= due:
            self._flush()
            return 0.0
        until = due if rides else min(due, self._renewed + lease * RIDES_AFTER)
        return max(until - now, 0.05)

    def local_calls(self) -> int | None:
        """Model calls the local journal holds now (None before the run opened)."""
        run = self.run
        return int(run.model_calls) if run is not None else None

    def start(self) -> None:
        self.pusher.start()

    def stop(self) -> None:
        """Stop the pusher and take the unit out of the group (once a push carrying it
        has ended): what it left unpushed is the last durability point's to push."""
        self.pusher.stop()
        self.withdraw()

    def withdraw(self) -> None:
        state = self.unit.withdraw()
        with self._lock:
            self._absorb(state)

    def heartbeat(self, progress: dict[str, Any]) -> None:
        with self._lock:
            if self.fenced.is_set():
                raise self._fenced()
            waiting = self.durability.rides and self._unpushed_since is not None
            self._offer(checkpoint=waiting, renew=True)
        self._flush()

    def ensure_owner(self) -> None:
        try:
            self.store.ensure_owner(self.claim)
        except Fenced:
            self.fenced.set()
            raise

    def events(self) -> list[Event]:
        if self.seeded is not None:
            delivered, self.seeded = self.seeded, None
        else:
            delivered = self.log.read()
        if self.brief is not None and self.brief.objective is not None:
            # Raising max_runs on main is the event that ends a wait for "objective".
            journal = (
                read_journal(self.sync.journal_dir) if self.sync.journal_dir.exists() else None
            )
            delivered += objective_events(self.brief, journal)
        return delivered + self.requeued


def repaid_calls(previous: ClaimRecord | None, claim: Claim, sync: BranchSync) -> int:
    """Model calls the previous holder reported (its claim's ``calls``) beyond those of the
    journal this holder checked out: they were lost with that holder's machine, and the
    run pays for them again. 0 when nothing was lost (or nothing was reported)."""
    if previous is None or not previous.calls or previous.fence >= claim.fence:
        return 0
    if not sync.journal_dir.exists():
        return previous.calls
    return max(0, previous.calls - summarize(read_journal(sync.journal_dir)).model_calls)


def recover_local(sync: BranchSync, secrets: list[str]) -> None:
    """Commit what a process of this machine killed mid-step left in the brief's work
    directory: journal lines it fsynced after its last checkpoint (a model call's answer,
    paid for) and the files they describe, so the checkout resumes them and no call is
    paid twice. Scanned first like any checkpoint: a tree holding a secret is not
    committed, and the checkout resets it to the last checkpoint."""
    if not sync.git_dir.is_dir():
        return
    try:
        CheckpointScan(secrets, journal_dir=sync.journal_dir).check_worktree(sync.workdir)
        sync.recover(f"{sync.brief}: recovered after its process was killed")
    except (Denied, GitError) as refused:
        LOG.warning("%s: the work directory is not resumed: %s", sync.brief, refused.message)


def wants_approval(brief: Brief, desk: Any) -> bool:
    """Whether ``finish`` waits for ``assay approve``: the brief needs it
    (``Brief.needs_approval``) or the desk manifest sets ``approval: true``."""
    return brief.needs_approval or bool(desk.approval)


def lock_workdir(workroot: Path, brief: str) -> tuple[Path, IO[bytes]]:
    """The work directory for ``brief``, locked for this process.

    Normally ``<workroot>/<brief>``. When another live process on this machine still holds
    it (a paused zombie that lost its claim), this process works in a directory of its own,
    so the zombie's late tool steps cannot touch the new holder's files. A crashed process
    holds no lock, and its directory is simply reset to the forge's tip and reused.
    """
    workroot.mkdir(parents=True, exist_ok=True)
    for name in (brief, f"{brief}.{os.getpid()}"):
        handle = open(workroot / f".{name}.lock", "a+b")  # noqa: SIM115 - held for the run
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return workroot / name, handle
    raise Internal(f"{workroot}: cannot lock a work directory for {brief}")


def clear_stale_git_locks(workdir: Path) -> None:
    """Remove the ``*.lock`` files a SIGKILLed git left in a work directory's repository.

    Only the holder of the work directory's flock (``lock_workdir``) runs git there, so
    once this process holds it any lock file is a dead process's, and would make every
    commit of the new holder fail."""
    git_dir = workdir / ".git"
    if not git_dir.is_dir():
        return
    for stale in [*git_dir.glob("*.lock"), *(git_dir / "refs").rglob("*.lock")]:
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


def last_line_sum(journal_dir: Path) -> str | None:
    """The ``sum`` of the last complete line of a journal directory's newest segment."""
    value = (last_line(journal_dir) or {}).get("sum")
    return value if isinstance(value, str) else None


def last_step_name(journal_dir: Path) -> str:
    """The ``name`` of the last complete line (``finish`` after the finish tool's result)."""
    value = (last_line(journal_dir) or {}).get("name")
    return value if isinstance(value, str) else ""


def last_line(journal_dir: Path) -> dict[str, Any] | None:
    """The last complete line of a journal directory's newest segment, parsed."""
    segments = sorted(journal_dir.glob("*.jsonl")) if journal_dir.exists() else []
    if not segments:
        return None
    try:  # a regular file only: never read through a link to /dev/zero
        fd = os.open(segments[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 65536))
        tail = handle.read(65536)
    lines = tail.split(b"\n")[:-1]  # an unterminated last line is still being written
    for raw in reversed(lines):
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        return value if isinstance(value, dict) else None
    return None


def session_secrets(forge: Forge, desk: Any) -> list[str]:
    """Values that must never reach a journal, review, log, tool command or judge: the
    forge's own (a GitHub forge's token), the desk's ``secrets``, ``$ASSAY_SECRET_ENV``'s,
    and the model's API key."""
    names = list(desk.secrets)
    key_env = getattr(desk.model, "api_key_env", None)
    if key_env:
        names.append(key_env)
    found = [str(value) for value in getattr(forge, "secrets", ()) or () if value]
    return list(dict.fromkeys([*found, *secrets_from_env(names)]))


def budget_for(brief: Brief, desk: Any) -> Budget:
    """The tightest of the brief's and the desk's budgets."""
    spec = brief.budget.tightest(desk.budget)
    return Budget(
        steps=spec.steps,
        model_calls=spec.model_calls,
        tokens=spec.tokens,
        usd=spec.usd,
        wall_s=spec.wall_s,
    )


@dataclass
class Session:
    """A claimed brief checked out and ready to execute: hooks (and their pusher), model,
    tools."""

    forge: Forge
    brief: Brief
    desk: Any
    store: ClaimStore
    sync: BranchSync
    hooks: DeskHooks
    worktree: Path
    function: Callable[[Any, Brief], Any]
    model: Any = None
    tools: Any = None
    lock: IO[bytes] | None = None
    repaid: int = 0  # model calls a lost machine had made past the checkout: paid again

    @classmethod
    def open(
        cls,
        *,
        forge: Forge,
        brief: Brief,
        claim: Claim,
        desk: Any,
        workroot: Path,
        store: ClaimStore,
        holder: str,
        tips: Mapping[str, str | None] | None = None,
        events: list[Event] | None = None,
        previous: ClaimRecord | None = None,
    ) -> Session:
        """``tips``: the branch and main as the claim's push found them (no fetch then);
        ``events``: the brief's events as that read found them (the first drain's);
        ``previous``: the claim record this claim took over (its ``calls``)."""
        identity = Identity.for_holder(desk.name, holder)
        workdir, lock = lock_workdir(workroot, brief.id)
        try:
            clear_stale_git_locks(workdir)
            session = cls._open(forge, brief, claim, desk, store, workdir, identity, lock, tips)
        except BaseException:
            lock.close()
            raise
        session.hooks.seeded = list(events) if events is not None else None
        try:
            session.repaid = repaid_calls(previous, claim, session.sync)
        except AssayError:
            session.repaid = 0  # a damaged journal: the run's own open reports it
        return session

    @classmethod
    def _open(
        cls,
        forge: Forge,
        brief: Brief,
        claim: Claim,
        desk: Any,
        store: ClaimStore,
        workdir: Path,
        identity: Identity,
        lock: IO[bytes],
        tips: Mapping[str, str | None] | None = None,
    ) -> Session:
        sync = BranchSync(forge, brief.id, workdir=workdir, identity=identity)
        durability = Durability.for_desk(desk, forge)
        secrets = session_secrets(forge, desk)
        # Step mode pushes every point before the run goes on: the forge's tip is the run
        # (a push lost in flight costs its one call, as documented); the other modes resume
        # the commits they chose not to push yet, and the lines a killed process fsynced
        # past its last commit.
        local = durability.mode != "step"
        if local:
            recover_local(sync, secrets)
        worktree = sync.checkout(known=tips, local=local)
        if desk.kind in ("agent", "command", "cli") and desk.sandbox_spec().isolation == "on":
            require_sandbox()  # SandboxUnavailable (78), saying how to fix, before any work
        hooks = DeskHooks(
            sync=sync,
            store=store,
            claim=claim,
            events=EventLog(forge, brief.id),
            brief=brief,
            scan=CheckpointScan(secrets, journal_dir=sync.journal_dir),
            durability=durability,
        )
        function, model, tools = desk_function(
            desk, brief, forge=forge, hooks=hooks, worktree=worktree, secrets=secrets
        )
        session = cls(
            forge=forge,
            brief=brief,
            desk=desk,
            store=store,
            sync=sync,
            hooks=hooks,
            worktree=worktree,
            function=function,
            model=model,
            tools=tools,
        )
        session.lock = lock
        hooks.start()  # the lease is renewed by the hooks' pusher, riding in group pushes
        return session

    def entry(self, run: Any, given: Any) -> Any:
        """What ``execute`` runs: the desk function on the brief as main has it now.

        The run's recorded input is only ``{"brief": id}``, so raising a budget or
        ``max_runs`` on main does not make the resumed run diverge.
        """
        self.hooks.run = run  # its model calls are what claim renewals report
        return self.function(run, self.brief)

    @property
    def claim(self) -> Claim:
        return self.hooks.claim

    @property
    def fenced(self) -> bool:
        return self.hooks.fenced.is_set()

    @property
    def journal_dir(self) -> Path:
        return self.worktree / journal_path(self.brief.id)

    def run_options(self) -> dict[str, Any]:
        # Agent and command desks run agent-chosen code: the journal says how it was confined.
        start: dict[str, Any] = (
            {"sandbox": self.desk.sandbox_spec().to_json()}
            if self.desk.kind in ("agent", "command", "cli")
            else {}
        )
        start["durability"] = self.hooks.durability.to_json()
        return {
            "journal_dir": self.journal_dir,
            "fence": self.hooks.claim.fence,
            "hooks": self.hooks,
            "model": self.model,
            "tools": self.tools,
            "budget": budget_for(self.brief, self.desk),
            "secrets": self.secrets(),
            "on_divergence": self.desk.on_divergence,
            "start": start,
            "takeover": {"repaid": self.repaid} if self.repaid else None,
        }

    def secrets(self) -> list[str]:
        """Values that must never reach a journal, review or log (``session_secrets``)."""
        return session_secrets(self.forge, self.desk)

    def close(self) -> None:
        self.hooks.stop()  # the pusher's pushes end here; flush() pushes the rest
        if isinstance(self.tools, ToolBox):
            self.tools.close()  # its sandbox: a stopped run holds no process
        if self.lock is not None:
            self.lock.close()  # releases the flock
            self.lock = None

    def flush(self, reason: str) -> None:
        """A last durability point after the run stopped (Fenced is remembered, not raised).

        It pushes tool steps still waiting for a group commit; the pushed journal head
        (``hooks.pushed_head``) is anchored in the claim by the desk loop's settlement."""
        try:
            with contextlib.suppress(Fenced, Denied):  # Denied: the checkpoint held a secret
                self.hooks.durability_point(f"after run: {reason}")
        finally:
            self.hooks.withdraw()  # the claim's settlement is the loop's own push

    def head(self) -> str:
        return str(self.sync.tip or "")

    def summary(self) -> dict[str, Any]:
        if not self.journal_dir.exists():
            return {}
        return summarize(read_journal(self.journal_dir)).to_json()


def desk_function(
    desk: Any,
    brief: Brief,
    *,
    forge: Forge,
    hooks: DeskHooks,
    worktree: Path,
    secrets: list[str],
) -> tuple[Callable[[Any, Brief], Any], Any, Any]:
    """(the function the runtime executes, its model, its tools) for the desk's kind,
    wrapped by the objective loop when the brief has one (the agent drives it itself)."""
    model = tools = None
    function: Callable[[Any, Brief], Any]
    if desk.kind == "agent":
        model = desk.build_model(workdir=worktree)
        tools = ToolBox(worktree, desk.tool_policy(), withheld=secrets)
        function = agent_function(
            desk, brief, model, tools, forge=forge, hooks=hooks, worktree=worktree, secrets=secrets
        )
    elif desk.kind == "cli":
        from assay.desks.kinds.cli import check_installed, cli_desk

        check_installed(desk)  # before anything is written
        tools = ToolBox(worktree, desk.tool_policy(), withheld=secrets)
        function = cli_desk(
            desk,
            worktree=worktree,
            head=hooks.sync.head,
            secrets=secrets,
            approval=wants_approval(brief, desk),
            fingerprint=worktree_fingerprint(brief.env, worktree, tools.process_env()),
        )
    elif desk.kind == "command":
        function = command_desk(desk, worktree, withheld=secrets)
    else:
        function = in_directory(desk.resolve_entry(), worktree)
    if brief.objective is not None and desk.kind != "agent":
        function = with_objective(function, brief=brief, forge=forge, hooks=hooks, secrets=secrets)
    if desk.kind in ("command", "python") and wants_approval(brief, desk):
        function = with_approval(function)  # the agent and cli kinds wait inside ``finish``
    return function, model, tools


def with_approval(function: Callable[[Any, Brief], Any]) -> Callable[[Any, Brief], Any]:
    """A ``command`` or ``python`` desk's function that, once its work is done, waits
    durably for ``assay approve`` (holding no process); a rejection fails the brief."""

    def wrapped(run: Any, current: Brief) -> Any:
        output = function(run, current)
        if isinstance(output, dict) and output.get("status") in ("failed", "cancelled"):
            return output
        event = run.wait_for("approval")
        if getattr(event, "kind", "approve") == "reject":
            reason = str(getattr(event, "text", "")) or "no reason"
            return {"status": "failed", "summary": f"rejected: {reason}", "evidence": []}
        return output

    return wrapped


def agent_function(
    desk: Any,
    brief: Brief,
    model: Any,
    tools: ToolBox,
    *,
    forge: Forge,
    hooks: DeskHooks,
    worktree: Path,
    secrets: list[str],
) -> Callable[[Any, Brief], Any]:
    """The ``agent`` kind's function: ``run_agent`` with the desk's options, driving the
    brief's objective loop itself when it has one."""
    options = AgentOptions(
        approval=wants_approval(brief, desk),
        compact_at=float(desk.compact_at),
        system_prompt=desk.system_prompt or AgentOptions().system_prompt,
    )
    specs = tools.specs()
    window = int(getattr(model, "context_window", 0) or 0)
    fingerprint = worktree_fingerprint(brief.env, worktree, tools.process_env())

    def agent(run: Any, current: Brief) -> Any:
        objective = (
            ObjectiveLoop(brief=current, forge=forge, hooks=hooks, secrets=secrets)
            if current.objective is not None
            else None
        )
        return run_agent(
            run,
            current,
            options=options,
            context_window=window,
            fingerprint=fingerprint,
            tool_specs=specs,
            objective=objective,
        ).to_json()

    return agent
