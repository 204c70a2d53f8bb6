"""``fold(entries)``: the one reading of a journal, from which every view is drawn.

A run's facts (what is recorded at each position, the events it consumed, what it used,
its last step, whether it waits and for what, the evidence it claimed, the process
sessions that held it, where a process stopped without closing its session and which
requests it had in flight were sent again) are computed here, in one pass over decoded entries
(``assay.journal.entries``). The runtime's replay index (``assay.runtime.history``), the
summary (``assay.journal.summary``), the board's ``JournalInfo``, the gate's claimed rows
(``assay.evidence.claimed``) and the demo's audit are views of ``RunFacts``, so they cannot
disagree about what a journal says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from assay.journal import entries as e

CLAIM_STEP = "evidence.claimed"  # the compute step a desk records its evidence claim in
POSITIONAL = frozenset({"step", "checkpoint", "signal", "wait", "wake", "compensate", "denied"})

# Sessions: a process holds the run from an opener to a closer (or its last entry).
_OPENS = frozenset({"start", "takeover", "wake"})
_CLOSES = frozenset({"wait", "end", "budget", "error"})
# Entries that say nothing about whether the run is running or waiting.
_NEUTRAL = frozenset({"takeover", "continue", "denied", "error", "diverged"})
# isinstance takes a tuple faster than a union built at every call (a fold runs per line).
_STEPS = (e.StepIntent, e.StepResult)
_STEP_LIKE = (e.StepIntent, e.StepResult, e.Compensate)
_RESULTS = (e.StepResult, e.Compensate)


def step_label(kind: str, name: str) -> str:
    """How a step is named in messages: ``model``, ``tool:write_file``, ``compute:plan``."""
    return kind if not name or name == kind else f"{kind}:{name}"


def _agent_step(entry: e.Entry) -> str | None:
    """``agent:Bash`` for a gateway model call whose request completed tool calls of the
    agent CLI (its result line lists them in ``tools``): the last tool the agent ran."""
    tools = entry.tools if isinstance(entry, e.StepResult) else None
    if tools and isinstance(tools[-1], Mapping):
        return f"agent:{tools[-1].get('name', '')}"
    return None


def label_of(entry: Mapping[str, Any]) -> str:
    """The label of a positional entry, as divergence messages name it."""
    kind = entry["kind"]
    if kind in {"step", "denied"}:
        return step_label(str(entry.get("step", "")), str(entry.get("name", "")))
    if kind == "compensate":
        return f"compensate:{entry.get('name', '')}"
    if kind in {"wait", "wake"}:
        return "sleep" if entry.get("sleep") else f"wait:{entry.get('for', '')}"
    if kind == "signal":
        return "signals"
    return str(kind)


@dataclass
class Recorded:
    """The entries recorded at one position."""

    pos: int
    label: str
    intent: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    wait: dict[str, Any] | None = None
    wake: dict[str, Any] | None = None
    other: dict[str, Any] | None = None  # checkpoint, signal or denied


@dataclass
class Totals:
    """What the recorded steps used, for budgets (archived steps count: they were paid)."""

    steps: int = 0
    model_calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    wall_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0

    def add(self, entry: Mapping[str, Any]) -> None:
        self.steps += 1
        if entry.get("step") == "model":
            self.model_calls += 1
        usage = entry.get("usage")
        if isinstance(usage, Mapping):
            spent_in, spent_out = _int(usage.get("in_tokens")), _int(usage.get("out_tokens"))
            self.tokens_in += spent_in
            self.tokens_out += spent_out
            self.tokens += spent_in + spent_out
            self.usd += _num(usage.get("usd"))
        self.wall_s += _num(entry.get("ms")) / 1000.0


@dataclass(frozen=True)
class Session:
    """One stretch during which a process held the run (start/takeover/wake to wait/end)."""

    start: datetime
    end: datetime
    fence: int = 0

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())


@dataclass(frozen=True)
class Interruption:
    """A process that stopped holding the run without closing its session (killed, or its
    lease lost): the entry at ``resumed_seq`` opened the next session."""

    fence: int
    last_seq: int  # the last entry the stopped process wrote
    last_time: str
    resumed_seq: int
    in_flight: tuple[tuple[int, str], ...] = ()  # (pos, label) of steps started, not finished


@dataclass
class RunFacts:
    """Everything a journal says about its run (see the module docstring)."""

    entries: int = 0
    positions: dict[int, Recorded] = field(default_factory=dict)
    consumed: set[str] = field(default_factory=set)
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    totals: Totals = field(default_factory=Totals)
    listed: set[str] = field(default_factory=set)  # blobs some line introduced
    ok_steps: int = 0
    ok_model_calls: int = 0
    last_step: str = ""  # label of the last step, e.g. "tool:write_file"
    last_step_time: str = ""
    last_kind: str = ""
    last_time: str = ""  # the last entry's own time, as written
    first_at: datetime | None = None
    last_at: datetime | None = None
    fence: int = 0
    status: str = "new"  # new | running | waiting | paused | done | failed
    waiting_for: str | None = None
    wait_until: str | None = None  # a timer wait's end, as written
    claim_step: dict[str, Any] | None = None  # the latest ok ``evidence.claimed`` step
    sessions: tuple[Session, ...] = ()
    fence_went_back: tuple[int, ...] = ()  # seq of each line whose fence is below an earlier
    unsandboxed: bool = False  # a start entry records network host or isolation off
    durability: str = ""  # the start entry's durability mode (step | window | exit)
    repaid_model_calls: int = 0  # takeovers' ``repaid``: calls lost with a machine, paid again
    interruptions: tuple[Interruption, ...] = ()
    # Positions of model steps started by one process and answered in a later one: the
    # request in flight at an interruption, sent upstream again by the resuming process
    # (counted even when the stop came before the first send: the journal cannot tell).
    repeated: tuple[int, ...] = ()
    in_flight: dict[int, str] = field(default_factory=dict)  # started, not yet finished

    @property
    def repeated_requests(self) -> int:
        """Model requests sent upstream more than once (each counted once per repeat)."""
        return len(self.repeated)

    @property
    def last_pos(self) -> int:
        return max(self.positions, default=0)

    def archive_from(self, pos: int) -> None:
        """Fork-on-divergence: what was recorded at ``pos`` and later no longer replays."""
        for stale in [p for p in self.positions if p >= pos]:
            del self.positions[stale]


def fold(lines: Iterable[Mapping[str, Any]]) -> RunFacts:
    """The facts of a journal's verified lines, oldest first (one pass; each line decoded
    by ``assay.journal.entries.decode``, which refuses an unknown kind)."""
    facts = RunFacts()
    sessions = _Sessions()
    went_back: list[int] = []
    repeated: list[int] = []
    for raw in lines:
        line = dict(raw)
        entry = e.decode(line)
        facts.entries += 1
        if entry.fence != facts.fence:
            if entry.fence < facts.fence:
                went_back.append(entry.seq)
            else:
                facts.fence = entry.fence
        if entry.blobs:
            facts.listed.update(entry.blobs)
        written = entry.time
        facts.last_kind, facts.last_time = entry.kind, written
        moment = parse_time(written) or _time(entry)
        if moment is not None:
            if facts.first_at is None or moment < facts.first_at:
                facts.first_at = moment
            if facts.last_at is None or moment > facts.last_at:
                facts.last_at = moment
        sessions.see(entry, moment, facts.in_flight)
        _in_flight(facts, entry, sessions, repeated)
        _positions(facts, entry, line)
        _progress(facts, entry, line)
        if isinstance(entry, e.Start):
            if isinstance(entry.sandbox, Mapping):
                facts.unsandboxed = entry.sandbox.get("sandboxed") is False
            if isinstance(entry.durability, Mapping):
                facts.durability = str(entry.durability.get("mode", ""))
        elif isinstance(entry, e.Takeover) and entry.repaid:
            facts.repaid_model_calls += max(0, entry.repaid)
    for rec in facts.positions.values():
        facts.consumed.update(_event_ids(rec))
    facts.sessions = sessions.done()
    facts.interruptions = tuple(sessions.interruptions)
    facts.repeated = tuple(repeated)
    facts.fence_went_back = tuple(went_back)
    facts.totals.usd = round(facts.totals.usd, 6)
    return facts


def _in_flight(facts: RunFacts, entry: e.Entry, sessions: _Sessions, repeated: list[int]) -> None:
    """Steps started and not finished, and model steps finished by a later session."""
    if isinstance(entry, e.StepIntent):
        facts.in_flight[entry.pos] = step_label(entry.step, entry.name)
        sessions.started[entry.pos] = sessions.number
    elif isinstance(entry, e.StepResult):
        facts.in_flight.pop(entry.pos, None)
        began = sessions.started.pop(entry.pos, None)
        if entry.step == "model" and began is not None and began != sessions.number:
            repeated.append(entry.pos)
    elif isinstance(entry, e.Diverged):
        for pos in [p for p in facts.in_flight if p >= entry.pos]:
            del facts.in_flight[pos]
            sessions.started.pop(pos, None)


def _positions(facts: RunFacts, entry: e.Entry, line: dict[str, Any]) -> None:
    """The replay index: positions, honouring fork-on-divergence."""
    if isinstance(entry, e.Start) and facts.start is None:
        facts.start = line
    elif isinstance(entry, e.End):
        facts.end = line
    elif isinstance(entry, e.Diverged):
        facts.archive_from(entry.pos)
    elif entry.kind in POSITIONAL:
        pos = int(getattr(entry, "pos", 0))
        rec = facts.positions.get(pos)
        if rec is None:
            rec = facts.positions[pos] = Recorded(pos, label_of(line))
        if isinstance(entry, e.StepIntent) or (
            isinstance(entry, e.Compensate) and entry.status == "started"
        ):
            rec.intent = line
        elif isinstance(entry, _RESULTS):
            rec.result = line
        elif isinstance(entry, e.Wait):
            rec.wait = line
        elif isinstance(entry, e.Wake):
            rec.wake = line
        else:
            rec.other = line


def _progress(facts: RunFacts, entry: e.Entry, line: dict[str, Any]) -> None:
    """Usage, the last step, the claimed evidence and whether the run waits."""
    if isinstance(entry, e.StepResult):
        facts.totals.add(line)
        if entry.status == "ok":
            facts.ok_steps += 1
            facts.ok_model_calls += entry.step == "model"
            if entry.name == CLAIM_STEP:
                facts.claim_step = line
    if isinstance(entry, _STEP_LIKE):
        step = entry.step if isinstance(entry, _STEPS) else entry.kind
        facts.last_step = _agent_step(entry) or step_label(step, entry.name)
        facts.last_step_time = entry.time
    if isinstance(entry, e.Wait):
        facts.waiting_for, facts.wait_until = entry.waiting_for, entry.until
        facts.status = "waiting"
    elif isinstance(entry, e.Budget):
        facts.status = "paused"
    elif isinstance(entry, e.End):
        facts.waiting_for = facts.wait_until = None
        facts.status = "done" if entry.status == "ok" else "failed"
    elif entry.kind not in _NEUTRAL:
        facts.waiting_for = facts.wait_until = None
        facts.status = "running"


class _Sessions:
    """Process sessions: opened by start/takeover/wake, closed by wait/end/budget/error."""

    def __init__(self) -> None:
        self.found: list[Session] = []
        self.start: datetime | None = None
        self.last: datetime | None = None
        self.fence = 0
        self.only_openers = True  # a takeover followed by start is one process, not two
        self.number = 0  # sessions opened before the current one
        self.started: dict[int, int] = {}  # pos -> the session number its intent was written in
        self.interruptions: list[Interruption] = []
        self.last_seq = 0
        self.last_time = ""
        self.after_closer = False

    def close(self) -> None:
        if self.start is not None and self.last is not None:
            self.found.append(Session(start=self.start, end=self.last, fence=self.fence))
        self.start = self.last = None
        self.fence = 0
        self.only_openers = True

    def see(self, entry: e.Entry, moment: datetime | None, in_flight: Mapping[int, str]) -> None:
        if entry.kind in _OPENS and not self.only_openers:
            # The process before this opener wrote no closer: it was killed or lost its lease.
            self.interruptions.append(
                Interruption(
                    fence=self.fence or entry.fence,
                    last_seq=self.last_seq,
                    last_time=self.last_time,
                    resumed_seq=entry.seq,
                    in_flight=tuple(sorted(in_flight.items())),
                )
            )
            self.close()
            self.number += 1
        elif entry.kind in _OPENS and self.after_closer:
            self.number += 1
        self.after_closer = False
        if entry.kind not in _OPENS:
            self.only_openers = False
        self.last_seq, self.last_time = entry.seq, entry.time
        if moment is None:
            return
        if self.start is None:
            self.start = moment
        self.fence = max(self.fence, entry.fence)
        self.last = moment
        if entry.kind in _CLOSES:
            self.close()
            self.after_closer = True

    def done(self) -> tuple[Session, ...]:
        self.close()
        return tuple(self.found)


def _event_ids(rec: Recorded) -> set[str]:
    """Ids of the events a position consumed: a wake's event, a signal drain's events."""
    found: list[Any] = []
    if rec.other is not None and rec.other["kind"] == "signal":
        found.extend(rec.other.get("events") or [])
    if rec.wake is not None:
        found.append(rec.wake.get("event"))
    ids = set()
    for event in found:
        if isinstance(event, Mapping) and event.get("id") is not None:
            ids.add(str(event["id"]))
        elif isinstance(event, str):
            ids.add(event)
    return ids


def _time(entry: e.Entry) -> datetime | None:
    """When an entry happened: its ``t1``, else ``t``, else ``t0``."""
    for name in ("t1", "t", "t0"):
        value = getattr(entry, name, None)
        if isinstance(value, str) and value:
            moment = parse_time(value)
            if moment is not None:
                return moment
    return None


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 string (``Z`` or offset; naive means UTC) as an aware datetime, else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)  # what Assay writes: UTC, "+00:00"
    except ValueError:
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    if moment.tzinfo is UTC:
        return moment
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
