"""The durable ``Run``: every non-deterministic thing desk code does goes through it.

Replay and live execution are one code path. Each call takes the next *position*; when
the journal holds a result there, the call returns it (after checking the name and kind
match, else ``Diverged``); when it does not, the call runs and records. Incomplete steps
(an intent with no result) run again: compute, model and tool steps simply rerun, effect
steps rerun with their recorded idempotency key after asking their ``check``.

Compute steps record only their result (a missing compute result simply means "run it");
model, tool and effect steps record an intent first. Every line is fsynced before the run
moves on.
"""

from __future__ import annotations

import random as _random
import time
import uuid as _uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

from assay.errors import AssayError, Denied, Diverged, Fenced, Paused, Suspension
from assay.journal import (
    DEFAULT_SEGMENT_BYTES,
    Journal,
    JournalWriter,
    entries,
    load_packed,
    read_journal,
    step_label,
)
from assay.journal.format import canonical
from assay.models.base import Message, ModelAdapter, ModelReply, ToolSpec, Usage
from assay.runtime.events import LocalEventStore
from assay.runtime.history import History, Recorded, Totals
from assay.runtime.shapes import Shape, check, to_json_value
from assay.runtime.types import Budget, Event, RunHooks, StepError, ToolRunner

T = TypeVar("T")
TIMER_INTERVAL_S = 5.0  # cheap steps reach a durability point at least this often


class EndOfHistory(BaseException):
    """Raised in replay-only mode when the code asks past the end of the journal."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


def utcnow() -> str:
    return datetime.now(UTC).isoformat()


class Run:
    """One durable run over one journal directory. Create it with ``Run.open``."""

    def __init__(
        self,
        journal: Journal,
        writer: JournalWriter | None,
        *,
        hooks: RunHooks | None,
        model: ModelAdapter | None,
        tools: ToolRunner | None,
        budget: Budget,
        on_divergence: Literal["fail", "fork"],
    ) -> None:
        self.directory = journal.directory
        self.journal = journal
        self.writer = writer
        self.hooks = hooks
        self.model_adapter = model
        self.tools = tools
        self.budget = budget
        self.on_divergence = on_divergence
        self.history = History.build(journal.entries)
        self.start_fields: dict[str, Any] = {}
        self.pos = 0
        self._state: Any = None
        self._compensations: list[tuple[str, Callable[[], Any]]] = []
        self._ctx_refs: list[str] = []
        self._ctx_node: str | None = None
        self._ctx_pending: list[Message] | None = None
        self._ref_cache: dict[str, str] = {}
        self._last_durable = time.monotonic()
        totals = self.history.totals
        self.steps, self.model_calls, self.tokens = totals.steps, totals.model_calls, totals.tokens
        self.usd, self.wall_s = totals.usd, totals.wall_s
        self._listed = self.history.listed

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        journal_dir: Path,
        *,
        fence: int = 0,
        hooks: RunHooks | None = None,
        model: ModelAdapter | None = None,
        tools: ToolRunner | None = None,
        budget: Budget | None = None,
        secrets: Iterable[str] = (),
        on_divergence: Literal["fail", "fork"] = "fail",
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        run_id: str | None = None,
        fsync: bool = True,
        start: dict[str, Any] | None = None,
        takeover: dict[str, Any] | None = None,
    ) -> Run:
        """Open (or create) the run journaled in ``journal_dir`` for execution.

        ``start``: fields added to the ``start`` entry when this open begins the run
        (the desk records its sandbox there: ``{"sandbox": SandboxSpec.to_json()}``).
        ``takeover``: fields added to the ``takeover`` entry when this open writes one
        (the desk records the model calls a lost machine took with it: ``{"repaid": 3}``).

        Verifies the journal (``Corrupt`` on damage), drops a torn last line, refuses a
        fence lower than the journal's (``Fenced``) and records a ``takeover`` when the
        fence is higher. ``fsync=False`` is for throwaway runs only (see ``JournalWriter``).
        """
        writer = JournalWriter.open(
            Path(journal_dir),
            run_id=run_id,
            secrets=secrets,
            segment_bytes=segment_bytes,
            fsync=fsync,
        )
        journal = writer.journal
        if fence < journal.fence:
            writer.close()
            raise Fenced(
                f"{journal_dir}: fence {fence} is older than the journal's fence {journal.fence}",
                fence=fence,
                journal_fence=journal.fence,
            )
        try:
            run = cls(
                journal,
                writer,
                hooks=hooks,
                model=model,
                tools=tools,
                budget=budget or Budget(),
                on_divergence=on_divergence,
            )
        except BaseException:  # a verified journal whose lines do not decode: Corrupt
            writer.close()
            raise
        run.start_fields = dict(start or {})
        if fence > journal.fence:
            previous = journal.fence
            writer.fence = fence
            repaid = (takeover or {}).get("repaid")
            writer.append(
                entries.Takeover(
                    fence=fence,
                    prev_fence=previous,
                    repaid=int(repaid) if repaid else None,
                    t=utcnow(),
                )
            )
        return run

    @classmethod
    def for_replay(
        cls, journal: Journal, *, model: ModelAdapter | None = None, tools: ToolRunner | None = None
    ) -> Run:
        """A read-only run that only replays ``journal`` (used by ``Replayer``)."""
        return cls(
            journal,
            None,
            hooks=None,
            model=model,
            tools=tools,
            budget=Budget(),
            on_divergence="fail",
        )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    @property
    def run_id(self) -> str:
        return self.writer.run_id if self.writer else self.journal.run_id

    @property
    def replay_only(self) -> bool:
        return self.writer is None

    # --------------------------------------------------------------- positions

    def _next(self, label: str) -> Recorded | None:
        self.pos += 1
        rec = self.history.positions.get(self.pos)
        if rec is None:
            if self.replay_only:
                raise EndOfHistory(self.pos)
            return None
        if rec.label != label:
            self._diverge(rec.label, label)
            return None
        return rec

    def _diverge(self, recorded: str, requested: str) -> None:
        message = f"step {self.pos} was recorded as {recorded}, the code asked for {requested}"
        if self.on_divergence == "fork" and self.writer is not None:
            self._append(
                entries.Diverged(pos=self.pos, recorded=recorded, requested=requested, t=utcnow())
            )
            self.history.archive_from(self.pos)
            self.history.consumed = History.build(self.journal_entries()).consumed
            return None
        raise Diverged(message, pos=self.pos, recorded=recorded, requested=requested)

    def journal_entries(self) -> list[dict[str, Any]]:
        """The entries as they stand now (re-read; used after a fork)."""
        return read_journal(self.directory).entries

    def finished_replay(self) -> None:
        """Raise ``Diverged`` (or fork) if the journal records positions the code skipped."""
        if self.history.last_pos > self.pos:
            rec = self.history.positions[self.pos + 1]
            self.pos += 1
            self._diverge(rec.label, "the end of the run")

    # ---------------------------------------------------------------- writing

    def _append(self, entry: entries.Entry, *, sync: bool = True) -> dict[str, Any]:
        if self.writer is None:
            raise EndOfHistory(self.pos)
        return self.writer.append(entry, sync=sync)

    def _durable(self, reason: str) -> None:
        self._last_durable = time.monotonic()
        if self.hooks is None:
            return
        try:
            self.hooks.durability_point(reason)
        except Denied as denied:
            # The hook refused the checkpoint (a secret in the work tree): say so where
            # the last step was recorded; nothing of it was committed or pushed.
            file = denied.details.get("file")
            entry = entries.Denied(
                pos=max(self.pos, 1),
                step="checkpoint",
                name=reason,
                reason=denied.message,
                file=str(file) if file else None,
                t=utcnow(),
            )
            self._append(entry)
            raise

    def _count(self, entry: dict[str, Any]) -> None:
        totals = Totals()
        totals.add(entry)
        self.steps += 1
        self.model_calls += totals.model_calls
        self.tokens += totals.tokens
        self.usd += totals.usd
        self.wall_s += totals.wall_s

    def _check_budget(self, kind: str) -> None:
        b = self.budget
        limits: list[tuple[str, float, float | None]] = [
            ("steps", self.steps, b.steps),
            ("model_calls", self.model_calls if kind == "model" else -1, b.model_calls),
            ("tokens", self.tokens, b.tokens),
            ("usd", self.usd, b.usd),
            ("wall_s", self.wall_s, b.wall_s),
        ]
        for name, used, limit in limits:
            if limit is not None and used >= limit:
                self._append(
                    entries.Budget(at=self.pos, limit=name, used=used, maximum=limit, t=utcnow())
                )
                self._durable("budget")
                raise Paused(
                    f"budget {name} exhausted ({used:g} of {limit:g}) before step {self.pos}; "
                    "raise it and run again to continue",
                    limit=name,
                    used=used,
                    max=limit,
                )

    # ------------------------------------------------------------------ steps

    def step(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        kind: Literal["compute", "model", "tool", "effect"] = "compute",
        key: str | None = None,
        retry: int = 0,
        output: Shape = None,
    ) -> Any:
        """Run ``fn`` once, durably; on replay return (or re-raise) what was recorded."""
        label = step_label(kind, name)
        rec = self._next(label)
        if rec is not None and rec.result is not None:
            return self._replayed(rec.result, label, output)
        return self._live(rec, label, name, kind, fn, key=key, retry=retry, output=output)

    def _replayed(self, result: dict[str, Any], label: str, output: Shape) -> Any:
        if result.get("status") == "error":
            error = result.get("error") or {}
            error_type = str(error.get("type", ""))
            raise StepError(
                f"{error_type}: {error.get('message', '')}", step=label, error_type=error_type
            )
        value = load_packed(self.directory, result.get("out"))
        if output is None:  # nothing to check (most steps), and a resume replays every one
            return value
        return check(value, output, label=f"{self.pos} ({label})", recorded=True)[0]

    def _live(
        self,
        rec: Recorded | None,
        label: str,
        name: str,
        kind: str,
        fn: Callable[[], Any],
        *,
        key: str | None,
        retry: int = 0,
        output: Shape = None,
        check_fn: Callable[[str], Any] | None = None,
        intent_extra: dict[str, Any] | None = None,
        result_extra: Callable[[Any], dict[str, Any]] | None = None,
    ) -> Any:
        pos = self.pos
        if self.replay_only:
            raise EndOfHistory(pos)
        self._check_budget(kind)
        recorded = rec.intent if rec is not None else None
        key = str((recorded or {}).get("key") or key or "") or f"{self.run_id}:{pos}"
        t0 = utcnow()
        if kind == "effect" and self.hooks is not None:
            self.hooks.ensure_owner()
        if kind != "compute" and recorded is None:
            extra_fields = intent_extra or {}
            self._append(
                entries.StepIntent(pos=pos, step=kind, name=name, key=key, t0=t0, **extra_fields)
            )
        started = time.monotonic()
        chosen = key
        existing = check_fn(key) if check_fn is not None and rec is not None else None
        value = existing
        if existing is None:
            value = self._run_body(
                fn,
                retry=retry,
                label=label,
                record_error=lambda exc: self._record_error(
                    pos, kind, name, chosen, t0, started, exc
                ),
            )
        given, packed, blobs, extra = self._packed(value, f"{pos} ({label})", output, result_extra)
        result = _step_result(
            pos, kind, name, key, t0, started, status="ok", out=packed, blobs=tuple(blobs), **extra
        )
        self._finished(result)
        return given

    def _packed(
        self,
        value: Any,
        where: str,
        output: Shape,
        result_extra: Callable[[Any], dict[str, Any]] | None,
    ) -> tuple[Any, Any, list[str], dict[str, Any]]:
        """``(value given back, packed out, new blobs, other result fields)`` of a step."""
        extra = result_extra(value) if result_extra else {}
        if "out" in extra:
            given, packed, blobs = value, extra.pop("out"), extra.pop("blobs", [])
        else:
            plain = to_json_value(value, label=where)
            given, record = check(plain, output, label=where, recorded=False)
            assert self.writer is not None
            packed, blobs = self.writer.pack(record)
        self._listed.update(blobs)
        return given, packed, list(blobs), extra

    def _finished(self, result: entries.StepResult) -> None:
        """Record a step's result; a model, tool or effect step is a durability point."""
        self._count(self._append(result))
        if result.step != "compute":
            self._durable(result.step)
        elif time.monotonic() - self._last_durable > TIMER_INTERVAL_S:
            self._durable("timer")

    def _run_body(
        self,
        fn: Callable[[], Any],
        *,
        retry: int,
        label: str,
        record_error: Callable[[Exception], None],
    ) -> Any:
        """``fn()``, retried ``retry`` times on an ordinary exception; the last is recorded."""
        for attempt in range(retry + 1):
            try:
                return fn()
            except AssayError:
                raise  # unavailable, fenced, denied…: nothing recorded, rerun later
            except Exception as exc:
                if attempt < retry:
                    time.sleep(min(0.05 * 2**attempt, 2.0))
                    continue
                record_error(exc)
                raise StepError(
                    f"{type(exc).__name__}: {exc}", step=label, error_type=type(exc).__name__
                ) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _record_error(
        self, pos: int, kind: str, name: str, key: str, t0: str, started: float, exc: Exception
    ) -> None:
        error = {"type": type(exc).__name__, "message": str(exc)}
        entry = _step_result(pos, kind, name, key, t0, started, status="error", error=error)
        self._count(self._append(entry))

    def map(self, name: str, value: Any, fn: Callable[[Any], Any], *, output: Shape = None) -> Any:
        """A recorded transform step: ``fn(value)``, checked against ``output``."""
        return self.step(name, lambda: fn(value), kind="compute", output=output)

    def effect(
        self,
        name: str,
        fn: Callable[[str], T],
        *,
        key: str | None = None,
        compensate: Callable[[], Any] | None = None,
        check: Callable[[str], Any] | None = None,
        output: Shape = None,
    ) -> T:
        """A side effect outside the run: ``fn(key)`` with a stable idempotency key.

        ``compensate`` is registered before the effect runs and is called (as its own
        recorded step) if the run later fails. ``check(key)``, if given, is asked first
        when the effect's intent was recorded but not its result; a non-None answer is
        taken as the effect's output instead of running it again.
        """
        label = step_label("effect", name)
        if compensate is not None:
            self._compensations.append((name, compensate))
        rec = self._next(label)
        if rec is not None and rec.result is not None:
            return self._replayed(rec.result, label, output)  # type: ignore[no-any-return]
        if rec is not None and rec.intent is not None:
            key = str(rec.intent.get("key") or "") or key  # a rerun reuses the recorded key
        chosen = key or f"{self.run_id}:{self.pos}"
        return self._live(  # type: ignore[no-any-return]
            rec,
            label,
            name,
            "effect",
            lambda: fn(chosen),
            key=chosen,
            output=output,
            check_fn=check,
        )

    def tool(self, name: str, args: dict[str, Any]) -> Any:
        """Call a declared tool as a step; ``Denied`` is recorded as a ``denied`` entry.

        Two refusals end a run with exit 77, both recorded at the step's position so a
        replay meets them at the same place: an undeclared tool, and a declared tool that
        refuses its arguments (a path outside the work tree, a command off the allowlist).
        """
        label = step_label("tool", name)
        rec = self._next(label)
        if rec is not None and rec.result is not None:
            return self._replayed(rec.result, label, None)
        refused_before = False
        if rec is not None and rec.other is not None and rec.other["kind"] == "denied":
            reason = str(rec.other.get("reason") or f"tool {name!r} is not declared by this desk")
            if self.replay_only or self.tools is None or name not in self.tools.allowed:
                raise Denied(reason, tool=name)
            # Declared now (a manifest was widened): ask the tool again.
            rec.other, refused_before = None, True
        if self.replay_only:
            raise EndOfHistory(self.pos)
        tools = self.tools
        if tools is None or name not in tools.allowed:
            self._append(entries.Denied(pos=self.pos, step="tool", name=name, t=utcnow()))
            raise Denied(f"tool {name!r} is not declared by this desk", tool=name)
        pos = self.pos

        def call() -> Any:
            try:
                return tools.call(name, args)
            except Denied as denied:
                if not refused_before:  # one ``denied`` entry per position
                    self._append(
                        entries.Denied(
                            pos=pos,
                            step="tool",
                            name=name,
                            args=args,
                            reason=denied.message,
                            t=utcnow(),
                        )
                    )
                raise

        return self._live(rec, label, name, "tool", call, key=None, intent_extra={"args": args})

    def model(self, messages: list[Message], *, tools: list[ToolSpec] | None = None) -> ModelReply:
        """One model call through the desk's adapter, recorded with its messages in blobs."""
        rec = self._next("model")
        if rec is not None and rec.result is not None:
            self._ctx_pending = list(messages)
            self._ctx_node = str(rec.intent["in"]) if rec.intent else None
            return self._replayed_reply(rec.result)
        if self.replay_only:
            raise EndOfHistory(self.pos)
        adapter = self.model_adapter
        if adapter is None:
            raise Denied("this run has no model adapter; it cannot call run.model()")
        intent_extra: dict[str, Any] = {}
        if rec is None or rec.intent is None:
            node, new_blobs = self._context(messages)
            intent_extra = {"context": node, "blobs": tuple(new_blobs)}

        def call() -> ModelReply:
            return adapter.complete(messages, tools=tools)

        def result(reply: ModelReply) -> dict[str, Any]:
            assert self.writer is not None
            ref = self.writer.put_blob(reply.message)
            blobs = [] if ref in self._listed else [ref]
            return {
                "out": {"blob": ref},
                "blobs": blobs,
                "usage": reply.usage.to_json(),
                "model": reply.model,
            }

        reply: ModelReply = self._live(
            rec,
            "model",
            "model",
            "model",
            call,
            key=None,
            intent_extra=intent_extra,
            result_extra=result,
        )
        return reply

    def _replayed_reply(self, result: dict[str, Any]) -> ModelReply:
        if result.get("status") == "error":
            self._replayed(result, "model", None)
        message = load_packed(self.directory, result.get("out"))
        usage = result.get("usage") or {}
        return ModelReply(
            message=message,
            usage=Usage(
                int(usage.get("in_tokens", 0)),
                int(usage.get("out_tokens", 0)),
                float(usage.get("usd", 0.0)),
            ),
            model=str(result.get("model", "")),
        )

    def _msg_ref(self, message: Message) -> str:
        assert self.writer is not None
        data = canonical(self.writer.redactor.value(message))
        ref = self._ref_cache.get(data)
        if ref is None:
            ref = self._ref_cache[data] = self.writer.blobs.put(data.encode("ascii"))
        return ref

    def _context(self, messages: list[Message]) -> tuple[str, list[str]]:
        """Store the request's messages once each; return (context node ref, new blobs)."""
        assert self.writer is not None
        if self._ctx_pending is not None:
            self._ctx_refs = [self._msg_ref(m) for m in self._ctx_pending]
            self._ctx_pending = None
        refs = [self._msg_ref(m) for m in messages]
        known = self._ctx_refs
        base: str | None = None
        added = refs
        if self._ctx_node and known and refs[: len(known)] == known:
            base, added = self._ctx_node, refs[len(known) :]
        node_ref = self.writer.put_blob({"base": base, "add": added})
        new = [r for r in dict.fromkeys([*added, node_ref]) if r not in self._listed]
        self._listed.update(new)
        self._ctx_refs, self._ctx_node = refs, node_ref
        return node_ref, new

    # ------------------------------------------------------- state and values

    def checkpoint(self, state: Any) -> None:
        """Record partial state; ``state()`` returns it, on replay too."""
        rec = self._next("checkpoint")
        if rec is not None and rec.other is not None:
            self._state = load_packed(self.directory, rec.other.get("out"))
            return
        assert self.writer is not None
        plain = to_json_value(state, label=f"{self.pos} (checkpoint)")
        packed, blobs = self.writer.pack(plain)
        self._append(entries.Checkpoint(pos=self.pos, out=packed, t=utcnow(), blobs=tuple(blobs)))
        self._state = plain

    def state(self) -> Any:
        """The state of the last ``checkpoint`` reached (None before any)."""
        return self._state

    def _value(self, name: str, produce: Callable[[], Any]) -> Any:
        label = step_label("compute", name)
        rec = self._next(label)
        if rec is not None and rec.result is not None:
            return load_packed(self.directory, rec.result.get("out"))
        value = produce()
        entry = entries.StepResult(
            pos=self.pos,
            step="compute",
            name=name,
            status="ok",
            key=f"{self.run_id}:{self.pos}",
            out={"value": value},
            t0=utcnow(),
        )
        self._count(self._append(entry))
        return value

    def now(self) -> datetime:
        """The current UTC time, recorded so replay returns the same instant."""
        return datetime.fromisoformat(self._value("now", utcnow))

    def random(self) -> float:
        """A random float in [0, 1), recorded."""
        return float(self._value("random", _random.random))

    def uuid(self) -> str:
        """A random UUID (hex string), recorded."""
        return str(self._value("uuid", lambda: _uuid.uuid4().hex))

    def heartbeat(self, progress: dict[str, Any] | None = None) -> None:
        """Renew the lease from inside a long step (a no-op for local runs)."""
        if self.hooks is not None:
            self.hooks.heartbeat(progress or {})

    # ------------------------------------------------------ events and waits

    def _events(self) -> list[Event]:
        if self.hooks is not None:
            return list(self.hooks.events())
        return LocalEventStore(self.directory).read()

    def signals(self) -> list[Event]:
        """Drain steering events (signal, cancel) delivered since the last drain, once each."""
        rec = self._next("signals")
        if rec is not None and rec.other is not None:
            return [
                Event.from_json(e, where=f"step {self.pos}") for e in rec.other.get("events", [])
            ]
        fresh: list[Event] = []
        for event in self._events():
            if event.kind in {"signal", "cancel"} and event.id not in self.history.consumed:
                self.history.consumed.add(event.id)
                fresh.append(event)
        self._append(entries.Signal(pos=self.pos, events=[e.to_json() for e in fresh], t=utcnow()))
        return fresh

    def wait_for(self, event: str, *, timeout: float | None = None) -> Event | None:
        """Return the event ``event`` once delivered; until then suspend (exit 75).

        With ``timeout`` (seconds), returns None once that much time has passed since the
        wait was first recorded. ``"approval"`` is ended by an approve or reject event.
        """
        return self._wait(f"wait:{event}", event, timeout, sleep=False)

    def sleep(self, seconds: float) -> None:
        """Suspend until ``seconds`` after this point was first reached."""
        self._wait("sleep", "timer", seconds, sleep=True)

    def _wait(self, label: str, name: str, timeout: float | None, *, sleep: bool) -> Event | None:
        rec = self._next(label)
        if rec is not None and rec.wake is not None:
            raw = rec.wake.get("event")
            return Event.from_json(raw, where=f"step {self.pos}") if isinstance(raw, dict) else None
        if self.replay_only:
            raise EndOfHistory(self.pos)
        waited = rec.wait if rec is not None else None
        if waited is not None:
            until = waited.get("until")
        elif timeout is not None:
            until = (datetime.now(UTC) + timedelta(seconds=timeout)).isoformat()
        else:
            until = None
        base: dict[str, Any] = {"pos": self.pos, "waiting_for": name, "sleep": sleep or None}
        for candidate in self._events():
            if candidate.id not in self.history.consumed and candidate.satisfies(name):
                self.history.consumed.add(candidate.id)
                self._append(entries.Wake(**base, event=candidate.to_json(), t=utcnow()))
                return candidate
        if until is not None and datetime.now(UTC) >= datetime.fromisoformat(until):
            self._append(entries.Wake(**base, event=None, timer=until, t=utcnow()))
            return None
        if waited is None:
            self._append(entries.Wait(**base, until=until, t=utcnow()))
        self._durable("wait")
        raise Suspension(name, until=until)

    # ------------------------------------------------------------ compensation

    def compensate(self) -> None:
        """Run registered compensations in reverse order, each a recorded step, once each."""
        for name, fn in reversed(self._compensations):
            rec = self._next(f"compensate:{name}")
            if rec is not None and rec.result is not None:
                continue
            if self.replay_only:
                raise EndOfHistory(self.pos)
            pos = self.pos
            if rec is None or rec.intent is None:
                self._append(entries.Compensate(pos=pos, name=name, status="started", t0=utcnow()))
            try:
                fn()
            except AssayError:
                raise
            except Exception as exc:
                error = {"type": type(exc).__name__, "message": str(exc)}
                self._append(
                    entries.Compensate(pos=pos, name=name, status="error", error=error, t1=utcnow())
                )
                continue
            self._append(entries.Compensate(pos=pos, name=name, status="ok", t1=utcnow()))
        self._compensations.clear()


def _step_result(
    pos: int, kind: str, name: str, key: str, t0: str, started: float, **fields: Any
) -> entries.StepResult:
    """A step's result entry, stamped with when it ended and how long it took."""
    return entries.StepResult(
        pos=pos,
        step=kind,
        name=name,
        key=key,
        t0=t0,
        t1=utcnow(),
        ms=round((time.monotonic() - started) * 1000, 3),
        **fields,
    )
