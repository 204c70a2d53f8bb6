"""Group commit: every push of one host to one forge goes out as one atomic push per round.

A desk pushes its checkpoints (the branch and the journal ref), its claim's renewals and
its records. Pushed one by one, twenty desks on a host push forty to eighty times a minute;
GitHub recommends six a minute per repository. So every pusher on the host writes what it
wants pushed into one spool, and one push carries everything the spool holds:

- **Units.** A pusher's request is a *unit*: ref updates, each a compare-and-swap from the
  ref's *base* (where the forge has it) to its *want*. A standing unit (a desk's run: its
  branch, journal ref and claim) is offered again after every local commit and rides in
  whatever push goes next; a one-shot unit (``Forge.push`` of a claim, a review, a record)
  is sent at once. The refs of one unit always land together or not at all.
- **Rounds.** Whoever needs a push sent takes the spool's leader lock (``flock``: threads and
  processes alike) and runs a *round*: it waits for the forge's push budget
  (``Forge.push_gate``, GitHub's ledger), then takes every unit the spool holds at that
  instant and sends them in ONE atomic push, a CAS on every ref, through the forge's own
  in-process transport (:mod:`assay.forge.sendpack`). While it waits for its turn, the
  other pushers' units pile up in the spool and go with it: the push budget paces the
  host, and group commit fills each push. Pushers waiting for their unit block on the
  leader lock, and when they get it their unit has usually gone already.
- **A refused ref.** Git has atomic pushes but no atomic groups: one stale ref refuses all.
  The round finds which unit lost (receive-pack's lock error names the stale ref; failing
  that, one ``ls-refs`` of the batch's refs compares each with its base and want), answers
  that unit alone ("lost", or "refused" with receive-pack's reason) and sends the rest
  again. A unit whose refs are already at their wants (a round whose answer was lost, a
  leader SIGKILLed after its push landed) is answered as landed. What a round cannot pin
  on one unit, or cannot send at all (git's own push is needed), it answers "alone": each
  unit's owner then pushes it by itself, as before group commit.

Nothing is lost: a unit leaves the spool only when its owner withdraws it; a round that
failed (the forge unreachable) answers the error and leaves the unit's bases where they
were, so its next round sends the same CAS again. A unit whose owner process is gone is
dropped at the next round: its commits stay in its work directory, where the next holder
on that machine resumes them (``BranchSync.checkout(local=True)``), as before. No claim is
held twice: every unit carries its claim ref, so a checkpoint lands only while its claim is
still at the commit the holder last wrote (docs/forge.md, "Group commit").

The spool is a folder beside the forge's cache (``<cache>.group-<digest>``, mode 0700),
one per forge URL and credential (a round pushes with its leader's credentials, so pushers
with other tokens are in other groups): ``leader.lock``, ``spool.lock`` and one JSON file
per unit. A unit file that does not read is removed with a warning; it cannot stop others'
rounds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from assay.errors import AssayError, ForgeUnavailable
from assay.forge.pushledger import pid_alive
from assay.plumbing import (
    UNCHECKED,
    GitError,
    PushGate,
    PushOutcome,
    PushResult,
    RefUpdate,
    RetryPolicy,
    with_retries,
)

if TYPE_CHECKING:
    from assay.forge.base import Forge
    from assay.forge.sendpack import Report, Transport

LOG = logging.getLogger("assay.forge.group")
FORMAT_VERSION = 1
MAX_UNIT_BYTES = 64 * 1024  # a unit file larger than this is not one Assay wrote
MAX_BATCH = 200  # units in one round (receive-pack takes at most 1,000 commands)
MAX_HIDDEN = 64
_KEY = re.compile(r"^[0-9a-f]{16,64}$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
# receive-pack's words for a ref refused only because another ref of its atomic push was.
INNOCENT = frozenset({"atomic transaction failed", "refused with the rest of this push"})
_IS_AT = re.compile(r"is at ([0-9a-f]{40}) but expected")
_LOCK = re.compile(r"cannot lock ref '([^']+)': (.*)")

Outcome = Literal["ok", "lost", "refused", "alone", "error"]


@dataclass(frozen=True)
class Answer:
    """What a round (or the owner's own push) did with one offer of a unit (``seq``).

    ``outcome``: ``ok`` (every ref at its want), ``lost`` (a ref was not at its base: a
    lost race), ``refused`` (receive-pack refused it for another reason), ``alone`` (the
    round could not send it: its owner pushes it itself), ``error`` (the forge could not be
    reached; nothing is known to have moved). ``statuses`` and ``errors`` are receive-pack's
    report for the unit's refs, for a one-shot push's own verdict."""

    seq: int
    outcome: Outcome
    statuses: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "outcome": self.outcome,
            "statuses": self.statuses,
            "errors": self.errors,
            "message": self.message,
        }


@dataclass(frozen=True)
class UnitState:
    """A unit as the spool holds it: each ref's base and want, and the last answer."""

    seq: int = 0
    bases: dict[str, str | None] = field(default_factory=dict)
    wants: dict[str, str] = field(default_factory=dict)
    answer: Answer | None = None
    landed_at: float | None = None

    @property
    def pending(self) -> bool:
        """Whether a ref is not yet at its want (the unit needs a push)."""
        return any(self.bases.get(ref) != want for ref, want in self.wants.items())

    def settled(self, seq: int) -> bool:
        """Whether offer ``seq`` needs no more rounds: its refs landed, or an answer at
        or after it said why they did not."""
        if not self.pending:
            return True
        answer = self.answer
        return answer is not None and answer.seq >= seq and answer.outcome != "alone"

    def updates(self) -> list[RefUpdate]:
        """The unit as CAS updates: each ref from its base to its want."""
        return [
            RefUpdate(ref, want, expected=self.bases.get(ref)) for ref, want in self.wants.items()
        ]


@dataclass
class _Taken:
    """A unit taken into a round: the offer it had when taken."""

    key: str
    seq: int
    git_dir: str
    hidden: list[str]
    refs: list[tuple[str, str | None, str]]  # (ref, base, want)

    def moved_tips(self) -> list[str]:
        return [want for _, base, want in self.refs if want != base]


@dataclass
class GroupStats:
    """What this process's rounds did (for tests, benchmarks and ``--json``)."""

    rounds: int = 0  # rounds led
    requests: int = 0  # push requests sent by those rounds
    units: int = 0  # units those requests carried, all told
    retried: int = 0  # requests sent again without a unit that lost or was refused
    alone: int = 0  # units answered "alone" (their owner pushed them itself)
    direct: int = 0  # pushes made at once, with nothing else in the spool to carry


class GroupPush:
    """One host's spool of units for one forge, and the rounds that push them.

    ``transport`` is the forge's in-process push (None: this forge is one git pushes to,
    and every unit is pushed alone by its owner); ``gate`` its push budget; ``read_refs``
    an in-process ``ls-refs`` of exact ref names (None when it cannot be read so);
    ``push_alone(git_dir, updates)`` the forge's own atomic push, outside the group.
    """

    def __init__(
        self,
        spool: Path,
        *,
        transport: Transport | None,
        gate: PushGate,
        where: str,
        push_alone: Callable[[Path, Sequence[RefUpdate]], PushResult],
        read_refs: Callable[[Sequence[str]], Mapping[str, str] | None] = lambda refs: None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.spool = spool
        self.transport = transport
        self.gate = gate
        self.where = where
        self.push_alone = push_alone
        self.read_refs = read_refs
        self.policy = policy
        self.stats = GroupStats()
        spool.mkdir(mode=0o700, parents=True, exist_ok=True)
        (spool / "units").mkdir(mode=0o700, exist_ok=True)

    @classmethod
    def for_forge(cls, forge: Forge) -> GroupPush:
        """The group of ``forge``'s host: a spool beside its cache, one per URL and
        credential (the digest of both names it; no secret is in the path)."""
        from assay.forge import lsrefs, sendpack

        config = dict(forge._config)
        digest = hashlib.sha256(
            json.dumps([forge.url, sorted(config.items())]).encode()
        ).hexdigest()[:16]
        state = forge.state_dir
        where = lsrefs.safe_url(forge.display_url)
        sent = sendpack.transport(forge.url, config, where)

        def read_refs(names: Sequence[str]) -> Mapping[str, str] | None:
            found = lsrefs.remote_refs(
                forge.url, list(names), config=config, display_url=forge.display_url
            )
            return None if found is None else {r: s for r, s in found.items() if r in names}

        return cls(
            state.parent / f"{state.name}.group-{digest}",
            transport=sent,
            gate=forge.push_gate,
            where=where,
            push_alone=lambda git_dir, updates: forge.push_alone(git_dir, updates),
            read_refs=read_refs,
            policy=forge._retry,
        )

    # ------------------------------------------------------------------ pushers

    def unit(
        self,
        git_dir: Path,
        *,
        key: str | None = None,
        hidden: Callable[[Sequence[RefUpdate]], Sequence[str]] = lambda updates: (),
    ) -> Unit:
        """A unit of this group for commits in ``git_dir``; ``key`` names a standing one
        (hex, 16 to 64 digits; default: a fresh one-shot key). ``hidden(updates)``: commits
        the forge holds that the updates' new commits grow from (what a pack leaves out)."""
        return Unit(self, key or uuid.uuid4().hex, Path(git_dir), hidden=hidden)

    def push(
        self,
        git_dir: Path,
        updates: Sequence[RefUpdate],
        *,
        hidden: Callable[[Sequence[RefUpdate]], Sequence[str]] = lambda updates: (),
    ) -> PushResult | None:
        """One atomic CAS push of ``updates`` sent with whatever else the host has to push;
        its outcome as the forge's own push would give it. None when it is not a push for
        the group (no in-process transport, an unconditional update or a delete, or a round
        answered "alone"): the caller pushes it itself."""
        if (
            self.transport is None
            or any(u.expected is UNCHECKED or u.new is None for u in updates)
            or all(u.new == u.expected for u in updates)  # nothing moves: nothing to carry
        ):
            return None
        with self._leading_if_free() as leading:
            if leading and not self._others_moving(None):
                self.stats.direct += 1
                result = self.push_alone(git_dir, updates)  # nothing to carry: no spool
                if result.ok:
                    self._pushed()
                return result
        unit = self.unit(git_dir, hidden=hidden)
        unit.offer(lambda state: updates)
        try:
            answer = unit.flush(alone=False).answer
        finally:
            unit.withdraw()
        if unit.pushed_alone is not None:
            return unit.pushed_alone  # pushed by itself: the forge's own answer
        if answer is None or answer.outcome == "alone":
            return None
        if answer.outcome == "error":
            raise ForgeUnavailable(answer.message or f"push {self.where}: no answer")
        return self._verdict(git_dir, updates, answer)

    def _verdict(self, git_dir: Path, updates: Sequence[RefUpdate], answer: Answer) -> PushResult:
        """receive-pack's report for ``updates``, judged as a push of them alone is."""
        from assay.forge.sendpack import NeedsGit, Report, judge

        report = Report(unpack="ok", statuses=dict(answer.statuses), errors=list(answer.errors))
        try:
            return judge(updates, report, atomic=True, git_dir=git_dir, where=self.where)
        except NeedsGit:
            return PushResult(
                PushOutcome.REJECTED if answer.outcome != "ok" else PushOutcome.UP_TO_DATE,
                {u.ref: PushOutcome.REJECTED for u in updates},
                "; ".join(answer.errors) or answer.outcome,
            )

    # ------------------------------------------------------------------ locks and files

    @contextlib.contextmanager
    def leading(self) -> Iterator[None]:
        """Hold the leader lock: only its holder runs a round (waits for one in progress)."""
        with open(self.spool / "leader.lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _leading_if_free(self) -> Iterator[bool]:
        """The leader lock when nobody holds it (True), else nothing (False) at once."""
        with open(self.spool / "leader.lock", "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _others_moving(self, key: str | None) -> bool:
        """Whether a unit other than ``key`` waits for a push (files are replaced whole,
        so they read without the spool lock; one offered after this look waits for the
        leader lock, and so for the next round)."""
        for other in self._keys():
            data = None if other == key else self._read(other)
            if data is None or not pid_alive(int(data["pid"])):
                continue
            if any(r["base"] != r["want"] for r in data["refs"]):
                return True
        return False

    @contextlib.contextmanager
    def _spooled(self) -> Iterator[None]:
        """Hold the spool lock (a few milliseconds: reading or writing unit files)."""
        with open(self.spool / "spool.lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _path(self, key: str) -> Path:
        return self.spool / "units" / f"{key}.json"

    def _read(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._drop(key, f"cannot be opened ({exc.strerror})")
            return None
        with open(fd, "rb") as handle:
            raw = handle.read(MAX_UNIT_BYTES + 1)
        try:
            if len(raw) > MAX_UNIT_BYTES:
                raise ValueError(f"over {MAX_UNIT_BYTES} bytes")
            return check_unit(json.loads(raw), key)
        except (ValueError, KeyError, TypeError) as exc:
            self._drop(key, str(exc))
            return None
        except AssayError as exc:  # a ref name RefUpdate refuses
            self._drop(key, exc.message)
            return None

    def _write(self, key: str, data: dict[str, Any]) -> None:
        path = self._path(key)
        temp = path.with_name(f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        temp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(temp, path)

    def _drop(self, key: str, why: str) -> None:
        LOG.warning("group push: unit %s in %s dropped: %s", key, self.spool, why)
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def _pushed(self) -> None:
        """Note that a push of this host landed now (``last_push``)."""
        marker = self.spool / "pushed"
        marker.touch()
        os.utime(marker)

    def last_push(self) -> float | None:
        """When a push of this host last landed (wall clock), None before the first: a
        desk's window counts from the host's last push, whoever made it, so the host
        pushes about once a window however many desks it runs."""
        try:
            return (self.spool / "pushed").stat().st_mtime
        except FileNotFoundError:
            return None

    def _keys(self) -> list[str]:
        keys = []
        for path in sorted((self.spool / "units").glob("*.json"), key=_mtime):
            if _KEY.match(path.stem):
                keys.append(path.stem)
            else:
                self._drop(path.stem, "not a unit's name")
        return keys

    # ------------------------------------------------------------------ rounds

    def round(self, *, first: str | None = None) -> None:
        """Push every unit the spool holds, in one atomic push (the caller holds the leader
        lock). ``first``: the unit that asked for the round, taken before the others.

        The units are taken once the push budget lets the push go (inside ``gate``), so
        every unit offered while the round waited for its turn goes with it."""
        self.stats.rounds += 1
        request: _Request | None = _Request(self, first)
        try:
            while request is not None:
                request = self._send(request)
        except AssayError as exc:
            assert request is not None
            self._answer_all(request.batch or [], "error", message=exc.message)
            request.batch = []
        finally:
            if request is not None and request.batch:  # a bug or an interrupt
                with self._spooled():
                    for taken in request.batch:
                        self._settle(taken, None)  # nothing answered, nothing in flight

    def _collect(self, first: str | None) -> list[_Taken]:
        """The units to push now, marked in flight (the caller holds the spool lock): every
        unit with a ref not at its want, but one whose owner process is gone (its commits
        wait in its work directory) and one answered for its offer already; a unit moving a
        ref another unit of this round moves waits for the next round."""
        keys = self._keys()
        if first in keys:
            keys.remove(first)
            keys.insert(0, first)
        taken: list[_Taken] = []
        claimed: set[str] = set()
        for key in keys:
            data = self._read(key)
            if data is None:
                continue
            if not pid_alive(int(data["pid"])):
                self._drop(key, f"its process {data['pid']} is gone")
                continue
            answer = data.get("answer") or {}
            refs = [(r["ref"], r["base"], r["want"]) for r in data["refs"]]
            moving = any(base != want for _, base, want in refs)
            said = answer.get("seq") == data["seq"]
            if not moving or (said and answer["outcome"] in ("lost", "refused", "alone")):
                continue
            names = {ref for ref, _, _ in refs}
            if names & claimed or len(taken) >= MAX_BATCH:
                continue
            claimed |= names
            data["flight"] = data["seq"]
            self._write(key, data)
            taken.append(_Taken(key, data["seq"], data["git_dir"], data["hidden"], refs))
        return taken

    def _send(self, request: _Request) -> _Request | None:
        """Send ``request`` once; answer the units it settles; the request of those to send
        again (None: the round is over)."""
        from assay.forge.sendpack import NeedsGit, parse_report

        def attempt() -> Report | None:
            raw = self.gate(request)
            return parse_report(raw, self.where) if request.batch else None

        try:
            report = with_retries(f"push {self.where}", attempt, policy=self.policy)
            if report is not None and report.unpack != "ok":
                raise NeedsGit(f"the forge could not unpack the pack ({report.unpack[:80]})")
        except NeedsGit as exc:
            LOG.info("group push: %s; each unit is pushed alone", exc)
            self._answer_all(request.batch or [], "alone", message=str(exc))
            return None
        batch = request.batch or []
        if report is None or not batch:
            return None
        if set(report.statuses) != {ref for taken in batch for ref, _, _ in taken.refs}:
            raise ForgeUnavailable(
                f"{self.where}: the push's report names other refs than were pushed"
            )
        verdicts = self._judge(batch, report)
        with self._spooled():
            for taken in batch:
                verdict = verdicts.get(taken.key)
                if verdict is not None:
                    self._settle(taken, verdict)
        rest = [taken for taken in batch if taken.key not in verdicts]
        request.batch = []
        if rest and len(rest) == len(batch):
            self._answer_all(rest, "alone", message="a refusal no unit can be named for")
            return None
        if not rest:
            return None
        self.stats.retried += 1
        return _Request(self, None, batch=rest)

    def _pack(self, batch: list[_Taken]) -> tuple[list[_Taken], bytes]:
        """One pack of what every unit's new commits need; a unit whose objects cannot be
        read from its repository is answered "alone" (its owner pushes it itself)."""
        import pygit2

        from assay.forge.sendpack import NeedsGit, pack_objects, reachable_objects

        objects: dict[Any, tuple[int, bytes]] = {}
        kept: list[_Taken] = []
        for taken in batch:
            tips = taken.moved_tips()
            hidden = [*(base for _, base, _ in taken.refs if base), *taken.hidden]
            try:
                repo = pygit2.Repository(taken.git_dir)  # its own handle: the owner writes on
                found = reachable_objects(repo, tips, hidden=hidden)
                for oid in found:
                    if oid not in objects:
                        kind, raw = repo.odb.read(oid)
                        objects[oid] = (int(kind), raw)
            except (NeedsGit, KeyError, ValueError, OSError, pygit2.GitError) as exc:
                LOG.info("group push: unit %s cannot be packed here (%s)", taken.key, exc)
                self._answer_all([taken], "alone", message=str(exc) or type(exc).__name__)
                continue
            kept.append(taken)
        return kept, pack_objects(list(objects.values()))

    def _judge(self, batch: list[_Taken], report: Report) -> dict[str, Answer]:
        """Each unit's answer that this report settles (a unit left out is sent again)."""
        locks: dict[str, str] = {}
        for line in report.errors:
            match = _LOCK.search(line)
            if match is not None:
                locks.setdefault(match.group(1), match.group(2))
        if all(s == "ok" for s in report.statuses.values()):
            return {t.key: self._report_for(t, report, "ok") for t in batch}
        verdicts: dict[str, Answer] = {}
        for taken in batch:
            outcome: Outcome | None = None
            for ref, _, want in taken.refs:
                # receive-pack says "atomic transaction failed" of every ref when one lock
                # fails; only its lock error, on side band 2, names the ref that did. A ref
                # already at its want, or one that "already exists", is left to the refs.
                status, lock = report.statuses[ref], locks.get(ref)
                moved = _IS_AT.search(lock or "")
                stale = moved is not None and moved.group(1) != want
                if stale or "unable to resolve reference" in (lock or ""):
                    outcome = "lost"
                elif lock is None and status not in ("ok", "failed to update ref", *INNOCENT):
                    outcome = outcome or "refused"
            if outcome is not None:
                verdicts[taken.key] = self._report_for(taken, report, outcome)
        refused = [key for key, answer in verdicts.items() if answer.outcome == "refused"]
        if len(batch) > 1 and len(refused) == len(batch):
            return {}  # every unit refused alike: the push as a whole was, so each goes alone
        # The lock error names one stale ref a push; the forge's refs as they are now name
        # every other unit that lost too, so the rest goes again once, not once per loser.
        rest = [t for t in batch if t.key not in verdicts]
        return {**verdicts, **self._by_refs(rest)} if rest else verdicts

    def _preflight(self, batch: list[_Taken]) -> list[_Taken]:
        """Answer, without a push, the units the forge's refs already settle (one lost
        its race since it was offered, or landed in a round whose answer was lost); the
        rest. A refused push of many units costs the budget a push and a re-send; one
        ``ls-refs`` costs none, so a round of more than one unit reads the refs first."""
        if len(batch) < 2:
            return batch
        verdicts = self._by_refs(batch)
        if verdicts:
            with self._spooled():
                for taken in batch:
                    if taken.key in verdicts:
                        self._settle(taken, verdicts[taken.key])
        return [taken for taken in batch if taken.key not in verdicts]

    def _by_refs(self, batch: list[_Taken]) -> dict[str, Answer]:
        """Settle units from the forge's refs as they are now: all at their wants (landed
        before), or one neither at its base nor its want (lost)."""
        names = sorted({ref for taken in batch for ref, _, _ in taken.refs})
        try:
            current = self.read_refs(names)
        except AssayError as exc:
            LOG.info("group push: the refs could not be read (%s)", exc.message)
            current = None
        if current is None:
            return {}
        verdicts: dict[str, Answer] = {}
        for taken in batch:
            now = {ref: current.get(ref) for ref, _, _ in taken.refs}
            if all(now[ref] == want for ref, _, want in taken.refs):
                statuses = {ref: "ok" for ref, _, _ in taken.refs}
                verdicts[taken.key] = Answer(taken.seq, "ok", statuses, [])
                continue
            moved = [(ref, base) for ref, base, want in taken.refs if now[ref] not in (base, want)]
            if moved:
                ref, base = moved[0]
                found = now[ref]
                errors = [
                    f"cannot lock ref '{ref}': "
                    + (
                        f"is at {found} but expected {base}"
                        if found and base
                        else "reference already exists"
                        if found
                        else "unable to resolve reference"
                    )
                ]
                statuses = {
                    r: ("failed to update ref" if r == ref else "atomic transaction failed")
                    for r, _, _ in taken.refs
                }
                verdicts[taken.key] = Answer(taken.seq, "lost", statuses, errors)
        return verdicts

    @staticmethod
    def _report_for(taken: _Taken, report: Report, outcome: Outcome) -> Answer:
        names = {ref for ref, _, _ in taken.refs}
        errors = [
            line
            for line in report.errors
            if (match := _LOCK.search(line)) is not None and match.group(1) in names
        ]
        statuses = {ref: report.statuses[ref] for ref in names}
        return Answer(taken.seq, outcome, statuses, errors)

    def _answer_all(self, batch: Sequence[_Taken], outcome: Outcome, *, message: str) -> None:
        if outcome == "alone":
            self.stats.alone += len(batch)
        with self._spooled():
            for taken in batch:
                self._settle(taken, Answer(taken.seq, outcome, message=message))

    def _settle(self, taken: _Taken, answer: Answer | None) -> None:
        """Write a round's answer into the unit's file (the caller holds the spool lock):
        a landed offer moves each ref's base to the want that was pushed, whatever the
        owner offered since."""
        data = self._read(taken.key)
        if data is None:
            return  # withdrawn by a process that died meanwhile
        data["flight"] = None
        if answer is not None:
            if answer.outcome == "ok":
                pushed = {ref: (base, want) for ref, base, want in taken.refs}
                for entry in data["refs"]:
                    was = pushed.get(entry["ref"])
                    if was is not None and entry["base"] == was[0]:
                        entry["base"] = was[1]
                data["landed_at"] = time.time()
                self._pushed()
            data["answer"] = answer.to_json()
        self._write(taken.key, data)


class _Request:
    """One push request of a round, made when the push budget lets it go: the units are
    taken then (a first request) or given (one sent again without a unit that lost), and
    their pack built once; a request sent again after a transport failure or a throttle is
    the same bytes."""

    def __init__(
        self, group: GroupPush, first: str | None, *, batch: list[_Taken] | None = None
    ) -> None:
        self.group = group
        self.first = first
        self.batch = batch
        self.body: bytes | None = None

    def __call__(self) -> bytes:
        from assay.forge.sendpack import commands

        group = self.group
        if self.body is None:
            if self.batch is None:
                with group._spooled():
                    self.batch = group._collect(self.first)
                self.batch = group._preflight(self.batch)
            self.batch, pack = group._pack(self.batch)
            updates = [
                RefUpdate(ref, want, expected=base)
                for taken in self.batch
                for ref, base, want in taken.refs
            ]
            self.body = commands(updates, atomic=True) + pack if updates else b""
            if self.batch:
                group.stats.requests += 1
                group.stats.units += len(self.batch)
        if not self.batch:
            return b""  # nothing left to carry: no request is made
        assert group.transport is not None
        return group.transport.request(self.body)


class Unit:
    """One pusher's unit in a group (see the module docstring). The owner offers with
    :meth:`offer`, sends with :meth:`flush`, reads what landed with :meth:`state` and takes
    the unit out with :meth:`withdraw` (it may offer again afterwards)."""

    def __init__(
        self,
        group: GroupPush,
        key: str,
        git_dir: Path,
        *,
        hidden: Callable[[Sequence[RefUpdate]], Sequence[str]],
    ) -> None:
        if not _KEY.match(key):
            raise ValueError(f"a unit's key is 16 to 64 hex digits, not {key!r}")
        self.group = group
        self.key = key
        self.git_dir = git_dir.resolve()
        self.hidden = hidden
        self.seq = 0
        self._known: UnitState = UnitState()  # what the file said last (kept past a withdraw)
        self.pushed_alone: PushResult | None = None  # the last push this unit made by itself

    def offer(self, build: Callable[[UnitState], Sequence[RefUpdate]]) -> UnitState:
        """Make the unit what ``build(state)`` returns: ``state`` is the unit as the spool
        holds it now (each ref's base: what has landed), read and written under the spool
        lock, so the owner builds its wants on the bases as they are. A ref new to the unit
        starts from its update's ``expected``; a ref the unit holds keeps its base. An
        empty answer offers nothing (the unit is left as it was)."""
        group = self.group
        with group._spooled():
            data = group._read(self.key)
            state = _state(data) if data is not None else self._restart()
            updates = list(build(state))
            if not updates:
                return state  # nothing offered: the unit stays as it is
            refs = {entry["ref"]: entry for entry in (data or {}).get("refs", [])}
            for update in updates:
                if update.new is None or update.expected is UNCHECKED:
                    raise GitError(f"{update.ref}: a group push moves refs by CAS only")
                if update.ref in refs:
                    refs[update.ref]["want"] = update.new
                else:
                    refs[update.ref] = {
                        "ref": update.ref,
                        "base": state.bases.get(update.ref, update.expected),
                        "want": update.new,
                    }
            for ref in [ref for ref, entry in refs.items() if entry["base"] == entry["want"]]:
                if ref not in {u.ref for u in updates}:
                    del refs[ref]  # settled and no longer asserted
            self.seq = max(state.seq, self.seq) + 1
            written = {
                "v": FORMAT_VERSION,
                "key": self.key,
                "pid": os.getpid(),
                "git_dir": str(self.git_dir),
                "seq": self.seq,
                "refs": list(refs.values()),
                "hidden": list(dict.fromkeys(self.hidden(updates)))[:MAX_HIDDEN],
                "flight": (data or {}).get("flight"),
                "answer": (data or {}).get("answer"),
                "landed_at": (data or {}).get("landed_at"),
            }
            group._write(self.key, written)
            self._known = _state(written)
            return self._known

    def state(self) -> UnitState:
        """The unit as the spool holds it (what landed, the last answer)."""
        with self.group._spooled():
            data = self.group._read(self.key)
        if data is not None:
            self._known = _state(data)
        return self._known

    def flush(self, *, alone: bool = True) -> UnitState:
        """Send the unit's last offer: wait for a round already under way, else lead one.
        ``alone``: when the round answers "alone", push it here by itself (a one-shot
        push's caller does that through its own path instead)."""
        seq = self.seq
        while True:
            state = self.state()
            if state.settled(seq):
                return state
            if self._alone(state, seq):
                if not alone:
                    return state
                self._push_alone(state)
                continue
            with self.group.leading():
                state = self.state()
                if state.settled(seq) or self._alone(state, seq):
                    continue
                if self.group._others_moving(self.key):
                    self.group.round(first=self.key)
                else:  # nothing to carry: this unit's own push, with no round to build
                    self.group.stats.direct += 1
                    self._push_alone(state)

    def withdraw(self) -> UnitState:
        """Take the unit out of the spool (after a round that carries it has ended) and
        return its last state: what landed, and whether it was lost."""
        group = self.group
        while True:
            with group._spooled():
                data = group._read(self.key)
                if data is None:
                    return self._known
                if data.get("flight") is None:
                    group._path(self.key).unlink()
                    self._known = _state(data)
                    return self._known
            with group.leading():
                pass  # a round carries it: wait for that round to end

    def _alone(self, state: UnitState, seq: int) -> bool:
        answer = state.answer
        if self.group.transport is None:
            return state.pending
        return answer is not None and answer.outcome == "alone" and answer.seq >= seq

    def _push_alone(self, state: UnitState) -> None:
        """Push the unit outside the group (the forge's own atomic push) and write its
        outcome into the spool as a round would."""
        updates = state.updates()
        result = self.group.push_alone(self.git_dir, updates)
        self.pushed_alone = result
        outcome: Outcome = "ok" if result.ok else "lost" if result.lost else "refused"
        statuses = {
            u.ref: "ok" if result.ok else result.refs.get(u.ref, result.outcome).value
            for u in updates
        }
        answer = Answer(self.seq, outcome, statuses, [result.detail] if result.detail else [])
        taken = _Taken(
            self.key,
            self.seq,
            str(self.git_dir),
            [],
            [(u.ref, state.bases.get(u.ref), str(u.new)) for u in updates],
        )
        with self.group._spooled():
            self.group._settle(taken, answer)

    def _restart(self) -> UnitState:
        """A unit offered again after a withdraw: it starts from what it last knew."""
        return replace(self._known, answer=None)


def _state(data: Mapping[str, Any]) -> UnitState:
    answer = data.get("answer")
    return UnitState(
        seq=int(data["seq"]),
        bases={entry["ref"]: entry["base"] for entry in data["refs"]},
        wants={entry["ref"]: entry["want"] for entry in data["refs"]},
        answer=Answer(
            answer["seq"],
            answer["outcome"],
            dict(answer["statuses"]),
            list(answer["errors"]),
            answer["message"],
        )
        if answer
        else None,
        landed_at=data.get("landed_at"),
    )


def check_unit(data: Any, key: str) -> dict[str, Any]:
    """A unit file's content, checked field by field (``ValueError`` names the first bad
    one): what a round pushes comes only from files that read as Assay writes them."""
    if not isinstance(data, dict) or data.get("v") != FORMAT_VERSION:
        raise ValueError("not a unit of this version")
    if data.get("key") != key:
        raise ValueError("field 'key' is not the file's name")
    pid = data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise ValueError("field 'pid' is not a process id")
    if not isinstance(data.get("git_dir"), str) or not os.path.isabs(data["git_dir"]):
        raise ValueError("field 'git_dir' is not an absolute path")
    for name in ("seq",):
        if not isinstance(data.get(name), int) or isinstance(data.get(name), bool):
            raise ValueError(f"field {name!r} is not a count")
    refs = data.get("refs")
    if not isinstance(refs, list) or len(refs) > 16:
        raise ValueError("field 'refs' is not a short list")
    seen: set[str] = set()
    for entry in refs:
        if not isinstance(entry, dict) or set(entry) != {"ref", "base", "want"}:
            raise ValueError("a ref entry is not {ref, base, want}")
        RefUpdate(str(entry["ref"]), None)  # GitError (a ValueError) for a bad name
        if not isinstance(entry["ref"], str) or entry["ref"] in seen:
            raise ValueError("a ref is named twice")
        seen.add(entry["ref"])
        if entry["base"] is not None and not _is_sha(entry["base"]):
            raise ValueError("a ref's base is not a commit id")
        if not _is_sha(entry["want"]):
            raise ValueError("a ref's want is not a commit id")
    hidden = data.get("hidden")
    if not isinstance(hidden, list) or len(hidden) > MAX_HIDDEN or not all(map(_is_sha, hidden)):
        raise ValueError("field 'hidden' is not a list of commit ids")
    flight = data.get("flight")
    if flight is not None and (not isinstance(flight, int) or isinstance(flight, bool)):
        raise ValueError("field 'flight' is not a count")
    answer = data.get("answer")
    if answer is not None:
        if not isinstance(answer, dict) or answer.get("outcome") not in (
            "ok",
            "lost",
            "refused",
            "alone",
            "error",
        ):
            raise ValueError("field 'answer' is not an answer")
        if not isinstance(answer.get("seq"), int) or not isinstance(answer.get("message"), str):
            raise ValueError("field 'answer' is not an answer")
        statuses, errors = answer.get("statuses"), answer.get("errors")
        if not isinstance(statuses, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in statuses.items()
        ):
            raise ValueError("field 'answer.statuses' is not a map of refs to statuses")
        if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
            raise ValueError("field 'answer.errors' is not a list of lines")
    landed = data.get("landed_at")
    if landed is not None and not isinstance(landed, (int, float)):
        raise ValueError("field 'landed_at' is not a time")
    return data


def _is_sha(value: Any) -> bool:
    return isinstance(value, str) and _SHA.match(value) is not None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
