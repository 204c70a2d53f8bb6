"""A session of calls made by an outside program (an agent CLI), journaled on one ``Run``.

Desk code asks the ``Run`` for things in an order it controls; an agent CLI does not: it
may send a side request (a title, a token count) before or after its next turn, and
concurrently. So a ``WireSession`` matches each call against the session's *not yet
consumed* recorded calls by label and key (a model call's key is the digest of its
normalised request; a tool call's, its canonical arguments) instead of by strict position:

- a call equal to a pending recorded one takes that one's position: replayed when the
  journal holds its result, run live (reusing its intent) when it was in flight;
- when nothing pending matches but a call is pending that must be made again, the session
  has diverged: a ``diverged`` entry at the first such position naming the first
  differing field (``on_divergence: fork``, then the call runs live), else ``Diverged``
  (exit 5). Side requests (model calls recorded with ``turn: false``: no tools, or a token
  count) need not be made again: a CLI that skips one is not diverging;
- otherwise the call runs live at the next position after every recorded one.

A session occupies the positions from the one after ``run.pos`` at its start up to the
position of its end step (``compute:cli.exit``): after ``close()`` the run continues
positionally from there. A program that resumes its own state (an agent CLI's native
resume) starts at ``resume_at``: the recorded calls before it are what that state already
holds, never made again, so only those from ``resume_at`` on are pending; ``on_turn(pos,
request)`` is told of each live conversation turn before its durability point, so the
program's state as of that turn rides in the same checkpoint. A live model call is a
durability point *before* it is forwarded (intent journaled, work tree and journal pushed)
and again after its answer is recorded, so a crash costs at most the call in flight.

Journal entries of a model call (``step: model``, ``name: wire``): the intent carries
``api``, ``route``, ``digest``, ``stream``, ``turn`` (a conversation turn, not a side
request), ``in`` (the context node: request items, without the API's per-request markers,
content-addressed, each stored once, the node naming the longest recorded prefix as its
``base`` and holding this request's ``marks``), ``req`` (a blob of the request without
its items) and ``steer`` (steering events delivered with it); the result carries ``out``
(a blob of the raw response bytes: a stream's events exactly as sent), ``http``,
``ctype``, ``usage``, ``model`` and ``tools`` (the tool calls the agent completed in this
request).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from assay.errors import Corrupt, Diverged
from assay.journal import entries
from assay.journal.blobs import BlobStore
from assay.journal.format import canonical, digest
from assay.runtime.history import History, Recorded
from assay.runtime.marks import Mark, remark, unmark_item, unmarked
from assay.runtime.memo import BUDGET_CHARS, Conversation, ConversationMemo
from assay.runtime.run import EndOfHistory, utcnow
from assay.runtime.types import Event

WIRE = "model:wire"
END = "compute:cli.exit"
CONTEXTS_KEPT = 16  # recent context nodes a new request may extend


@dataclass(frozen=True)
class WireRequest:
    """One model request as the session needs it (built by the gateway)."""

    api: str
    route: str
    items: list[Any]  # the conversation, content-addressed one item a blob
    rest: dict[str, Any]  # the request without its conversation
    digest: str  # what a recorded call must equal (after normalisation)
    stream: bool = False
    tools: list[dict[str, Any]] = field(default_factory=list)  # completed agent tool calls
    steerable: bool = False  # a main-conversation turn (steering may be added to it)
    marks: tuple[str, ...] = ()  # the API's per-request marker keys (``cache_control``)
    # ``items`` as the session's memo knows them (``WireSession.memo``), when the caller has it
    conversation: Conversation | None = None


@dataclass(frozen=True)
class WireReply:
    """A model answer, live or recorded, with what it cost."""

    status: int
    content_type: str
    body: bytes
    stream: bool
    in_tokens: int = 0
    out_tokens: int = 0
    usd: float = 0.0
    model: str = ""
    tool_names: tuple[str, ...] = ()
    replayed: bool = False
    denied: str | None = None  # why the answer is refused to the CLI (a ``denied`` entry)


# forward(request, steering events) -> the live answer (raises to record nothing)
Forward = Callable[[WireRequest, list[Event]], WireReply]
# difference(recorded request body, request) -> the first field that differs
Difference = Callable[[dict[str, Any], WireRequest], str]


class WireSession:
    """Matches and journals an outside program's calls on ``run`` (module docstring)."""

    def __init__(
        self,
        run: Any,
        *,
        difference: Difference,
        resume_at: int | None = None,
        on_turn: Callable[[int, WireRequest], None] | None = None,
        memo_budget: int = BUDGET_CHARS,
    ) -> None:
        self.run = run
        self.difference = difference
        self.on_turn = on_turn
        self.start = self.top = int(run.pos)
        self.pending: dict[int, Recorded] = {}
        for pos in sorted(p for p in run.history.positions if p > self.start):
            rec = run.history.positions[pos]
            if rec.label == END:
                break
            if resume_at is None or pos >= resume_at:
                self.pending[pos] = rec
            for event in (rec.intent or {}).get("steer") or []:
                run.history.consumed.add(str(event.get("id")))
        if resume_at is not None:
            self.top = max(self.top, resume_at - 1)
        self.contexts: dict[str, list[str]] = {}  # recent context nodes: their items' refs
        self.store = BlobStore(run.directory)
        # What the work on each conversation item found (this session's gateway uses it too),
        # so a call's cost is that of its new items.
        self.memo = ConversationMemo(memo_budget)

    # ---------------------------------------------------------------- placement

    def _key(self, rec: Recorded) -> str:
        if rec.label == WIRE:
            return str((rec.intent or rec.result or {}).get("digest", ""))
        source = rec.intent or rec.other or {}
        return canonical(source.get("args") or {}) if rec.label.startswith("tool:") else ""

    def _place(
        self, label: str, key: str, describe: Callable[[Recorded], str]
    ) -> tuple[int, Recorded | None]:
        for pos in sorted(self.pending):
            rec = self.pending[pos]
            if rec.label == label and self._key(rec) == key:
                del self.pending[pos]
                self.top = max(self.top, pos)
                return pos, rec
        expected = [p for p in sorted(self.pending) if _awaited(self.pending[p])]
        if expected:
            first = expected[0]
            self._diverge(first, self.pending[first], label, describe(self.pending[first]))
        # Past every recorded position: a side request still pending keeps its own.
        self.top = max([self.top, *self.pending]) + 1
        return self.top, None

    def _diverge(self, pos: int, rec: Recorded, requested: str, field: str) -> None:
        run = self.run
        message = f"call {pos} was recorded as {rec.label}, the agent asked for {requested}" + (
            f" (first difference: {field})" if field else ""
        )
        if run.on_divergence != "fork" or run.writer is None:
            raise Diverged(message, pos=pos, recorded=rec.label, requested=requested, field=field)
        run._append(
            entries.Diverged(
                pos=pos, recorded=rec.label, requested=requested, field=field, t=_now()
            )
        )
        run.history.archive_from(pos)
        run.history.consumed = History.build(run.journal_entries()).consumed
        self.pending.clear()
        self.top = max(self.top, pos - 1)

    def close(self) -> None:
        """The program ended: recorded calls it did not make are a divergence; then the
        run continues positionally after the session."""
        expected = [p for p in sorted(self.pending) if _awaited(self.pending[p])]
        if expected:
            first = expected[0]
            self._diverge(first, self.pending[first], "the end of the session", "")
        self.top = max([self.top, *self.pending])  # side requests not sent again are skipped
        self.run.pos = self.top

    # --------------------------------------------------------------- tool steps

    def tool(self, name: str, args: dict[str, Any]) -> Any:
        """``run.tool(name, args)`` at the position this call matches."""
        label = f"tool:{name}"
        pos, _ = self._place(label, canonical(args), lambda rec: _args_difference(rec, args))
        return self._at(pos, lambda: self.run.tool(name, args))

    def wait_for(self, event: str, *, timeout: float | None = None) -> Any:
        """``run.wait_for(event, timeout=)`` at the position this wait matches."""
        pos, _ = self._place(f"wait:{event}", "", lambda rec: "")
        return self._at(pos, lambda: self.run.wait_for(event, timeout=timeout))

    def recorded_waits(self, event: str) -> int:
        """How many waits for ``event`` the run's journal holds (this session's or not)."""
        label = f"wait:{event}"
        return sum(1 for rec in self.run.history.positions.values() if rec.label == label)

    def settle_waits(self, event: str) -> None:
        """Place every pending recorded wait for ``event`` before the program starts: a
        wait the desk itself made (not one the program asked for), which its relaunch will
        not ask for again. Each returns once it has ended, or suspends again."""
        label = f"wait:{event}"
        for pos in sorted(p for p, rec in self.pending.items() if rec.label == label):
            if pos in self.pending:
                self.wait_for(event)

    def signals(self) -> list[Event]:
        pos, _ = self._place("signals", "", lambda rec: "")
        return self._at(pos, self.run.signals)  # type: ignore[no-any-return]

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """A compute step inside the session (its key is its name)."""
        pos, _ = self._place(f"compute:{name}", "", lambda rec: "")
        return self._at(pos, lambda: self.run.step(name, fn))

    def _at(self, pos: int, fn: Callable[[], Any]) -> Any:
        self.run.pos = pos - 1
        try:
            return fn()
        finally:
            self.run.pos = self.top

    # -------------------------------------------------------------- model calls

    def call(
        self, request: WireRequest, forward: Forward, *, check: Callable[[WireReply], str | None]
    ) -> WireReply:
        """One model call: replayed from the journal when recorded, else forwarded.

        ``check`` refuses an answer (an undeclared tool): the answer is still recorded (it
        was paid for), a ``denied`` entry follows, and the reply carries ``denied``.
        Budget exhaustion raises ``Paused`` before anything is forwarded.
        """
        pos, rec = self._place(WIRE, request.digest, lambda r: self._describe(r, request))
        run = self.run
        run.pos = pos
        try:
            if rec is not None and rec.result is not None:
                self._remember_replayed(rec, request)
                return self._replayed(rec)
            return self._live(pos, rec, request, forward, check)
        finally:
            run.pos = self.top

    def _replayed(self, rec: Recorded) -> WireReply:
        result = rec.result or {}
        out = result.get("out") or {}
        body = self.store.get(str(out.get("blob")), where=f"step {rec.pos}")
        usage = result.get("usage") or {}
        denied = rec.other.get("reason") if rec.other and rec.other["kind"] == "denied" else None
        return WireReply(
            status=int(result.get("http", 200)),
            content_type=str(result.get("ctype", "application/json")),
            body=body,
            stream=bool(result.get("stream")),
            in_tokens=int(usage.get("in_tokens", 0)),
            out_tokens=int(usage.get("out_tokens", 0)),
            usd=float(usage.get("usd", 0.0)),
            model=str(result.get("model", "")),
            replayed=True,
            denied=str(denied) if denied is not None else None,
        )

    def _live(
        self,
        pos: int,
        rec: Recorded | None,
        request: WireRequest,
        forward: Forward,
        check: Callable[[WireReply], str | None],
    ) -> WireReply:
        run = self.run
        if run.replay_only:
            raise EndOfHistory(pos)
        if request.steerable and self.on_turn is not None:
            # What the program holds as of this turn rides in this turn's checkpoint (or in
            # the pause's, when the budget refuses the turn).
            self.on_turn(pos, request)
        run._check_budget("model")
        key = f"{run.run_id}:{pos}"
        if rec is not None and rec.intent is not None:
            steer = [Event.from_json(e) for e in rec.intent.get("steer") or []]
            key = str(rec.intent.get("key") or key)
            t0 = str(rec.intent.get("t0") or _now())
        else:
            steer = self._steering() if request.steerable else []
            t0 = _now()
            run._append(self._intent(pos, key, t0, request, steer))
        run._durable("model")  # the work tree as of this call is on the forge first
        reply = forward(request, steer)
        assert run.writer is not None
        ref = run.writer.put_blob(reply.body)
        blobs = [] if ref in run._listed else [ref]
        run._listed.update(blobs)
        usage = {"in_tokens": reply.in_tokens, "out_tokens": reply.out_tokens, "usd": reply.usd}
        entry = entries.StepResult(
            pos=pos,
            step="model",
            name="wire",
            status="ok",
            key=key,
            out={"blob": ref},
            digest=request.digest,
            http=reply.status,
            ctype=reply.content_type,
            stream=reply.stream,
            usage=usage,
            model=reply.model,
            t0=t0,
            t1=_now(),
            tools=tuple(request.tools) if request.tools else None,
            blobs=tuple(blobs),
        )
        run._count(run._append(entry))
        refusal = check(reply)
        if refusal is not None:
            run._append(
                entries.Denied(pos=pos, step="model", name="wire", reason=refusal, t=_now())
            )
        run._durable("model")
        return _with_denied(reply, refusal)

    def _intent(
        self, pos: int, key: str, t0: str, request: WireRequest, steer: list[Event]
    ) -> entries.StepIntent:
        run = self.run
        assert run.writer is not None
        node, blobs = self._context(request)
        req = run.writer.put_blob(request.rest)
        if req not in run._listed:
            blobs.append(req)
            run._listed.add(req)
        return entries.StepIntent(
            pos=pos,
            step="model",
            name="wire",
            key=key,
            t0=t0,
            api=request.api,
            route=request.route,
            digest=request.digest,
            stream=request.stream,
            req=req,
            turn=request.steerable,
            context=node,
            blobs=tuple(blobs),
            steer=[e.to_json() for e in steer] if steer else None,
        )

    def _steering(self) -> list[Event]:
        run = self.run
        fresh: list[Event] = []
        for event in run._events():
            if event.kind == "signal" and event.id not in run.history.consumed:
                run.history.consumed.add(event.id)
                fresh.append(event)
        return fresh

    # ------------------------------------------------------------ content address

    def _conversation(self, request: WireRequest) -> Conversation:
        return request.conversation or self.memo.conversation(request.items)

    def _unmarked(self, request: WireRequest, known: Conversation) -> tuple[list[Any], list[Mark]]:
        """The request's items without their markers, and the marks (``unmark``)."""
        if not request.marks:
            return request.items, []
        marks = request.marks
        return unmarked(known.each(("unmark", marks), lambda item: unmark_item(item, marks)))

    def _refs(
        self, request: WireRequest, items: list[Any], known: Conversation, *, store: bool
    ) -> list[str]:
        """The blob refs of ``items`` (the request's, unmarked), each stored when ``store``;
        remembered once stored (a replayed call's items may not be in this journal), so a
        call hashes and stores only its new items."""
        run = self.run
        kind = ("ref", request.marks)
        if store:
            return known.each(kind, run._msg_ref, over=items)
        redact = run.writer.redactor.value if run.writer is not None else (lambda v: v)
        return known.each(
            kind,
            lambda item: digest(canonical(redact(item)).encode("ascii")),
            over=items,
            remember=False,
        )

    def _context(self, request: WireRequest) -> tuple[str, list[str]]:
        """The request's context node: its items stored without their markers, each once,
        the node naming the longest recent node its items extend and adding the rest; the
        markers, which belong to this request only, are kept in the node (``marks``)."""
        run = self.run
        conversation = self._conversation(request)
        items, marks = self._unmarked(request, conversation)
        refs = self._refs(request, items, conversation, store=True)
        base, known = self._longest_prefix(refs)
        value: dict[str, Any] = {"base": base, "add": refs[known:]}
        if marks:
            value["marks"] = marks
        node = run.writer.put_blob(value)
        new = [r for r in dict.fromkeys([*refs[known:], node]) if r not in run._listed]
        run._listed.update(new)
        self._remember(node, refs)
        return node, new

    def _longest_prefix(self, refs: list[str]) -> tuple[str | None, int]:
        best, length = None, 0
        for node, known in self.contexts.items():
            if length < len(known) <= len(refs) and refs[: len(known)] == known:
                best, length = node, len(known)
        return best, length

    def _remember(self, node: str, refs: list[str]) -> None:
        self.contexts.pop(node, None)
        self.contexts[node] = refs
        while len(self.contexts) > CONTEXTS_KEPT:
            self.contexts.pop(next(iter(self.contexts)))

    def _remember_replayed(self, rec: Recorded, request: WireRequest) -> None:
        """Remember a replayed call's node as a base for later ones, when it holds exactly
        the request's unmarked items: a node of an older journal stored items as sent
        (markers included), and extending it would rebuild them with their old markers."""
        node = (rec.intent or {}).get("in")
        if not isinstance(node, str):
            return
        known = self._conversation(request)
        items, _ = self._unmarked(request, known)
        refs = self._refs(request, items, known, store=False)
        value = json.loads(self.store.get(node, where=f"step {rec.pos}"))
        base = value.get("base") if isinstance(value, dict) else None
        added = value.get("add") if isinstance(value, dict) else None
        if base is None:
            held: list[str] = []
        elif isinstance(base, str) and base in self.contexts:
            held = self.contexts[base]
        else:
            return
        if added == refs[len(held) :] and refs[: len(held)] == held:
            self._remember(node, refs)

    def recorded_body(self, rec: Recorded) -> dict[str, Any]:
        """The request a recorded model call sent (items re-joined from the context)."""
        intent = rec.intent or {}
        rest = json.loads(self.store.get(str(intent.get("req")), where=f"step {rec.pos}"))
        refs: list[str] = []
        node = intent.get("in")
        chain: list[list[str]] = []
        marks: Any = None  # only the call's own node's: a base's were its own request's
        while isinstance(node, str):
            value = json.loads(self.store.get(node, where=f"step {rec.pos}"))
            if not isinstance(value, dict):
                raise Corrupt(f"step {rec.pos}: context node {node} is not an object")
            if marks is None:
                marks = value.get("marks", [])
            chain.append(list(value.get("add") or []))
            node = value.get("base")
        for added in reversed(chain):
            refs.extend(added)
        items = [json.loads(self.store.get(r, where=f"step {rec.pos}")) for r in refs]
        if marks:
            items = remark(items, marks, where=f"step {rec.pos}")
        from assay.gateway.apis import REGISTRY  # the API's own shape, from its registry

        api = REGISTRY.get(str(intent.get("api")))
        if api is None:
            raise Corrupt(
                f"step {rec.pos}: a model call of an unknown wire API {intent.get('api')!r}"
            )
        return {**rest, api.conversation_key: items}

    def _describe(self, rec: Recorded, request: WireRequest) -> str:
        if rec.label != WIRE or rec.intent is None:
            return ""
        return self.difference(self.recorded_body(rec), request)


def first_difference(recorded: Any, current: Any, path: str = "") -> str | None:
    """The first field (``messages[3].content``) where two JSON values differ, or None."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        for key in sorted(set(recorded) | set(current)):
            where = f"{path}.{key}" if path else str(key)
            if key not in recorded or key not in current:
                return where
            found = first_difference(recorded[key], current[key], where)
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(current, list):
        for index, (left, right) in enumerate(zip(recorded, current, strict=False)):
            found = first_difference(left, right, f"{path}[{index}]")
            if found is not None:
                return found
        if len(recorded) != len(current):
            return f"{path}[{min(len(recorded), len(current))}]"
        return None
    return None if recorded == current else (path or "(the body)")


def _awaited(rec: Recorded) -> bool:
    """Whether a recorded call must be made again: everything but a model call that was a
    side request (``turn: false``: a title, a token count), which a CLI may skip."""
    return not (rec.label == WIRE and (rec.intent or {}).get("turn") is False)


def _args_difference(rec: Recorded, args: dict[str, Any]) -> str:
    recorded = (rec.intent or rec.other or {}).get("args") or {}
    return first_difference(recorded, args) or ""


def _with_denied(reply: WireReply, reason: str | None) -> WireReply:
    if reason is None:
        return reply
    return replace(reply, denied=reason)


def _now() -> str:
    return utcnow()


__all__ = ["END", "WIRE", "WireReply", "WireRequest", "WireSession", "first_difference"]
