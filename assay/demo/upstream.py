"""A scripted upstream for real agent CLIs: one loopback server speaking the wire APIs they
use (every API of ``assay.gateway.apis``), each streamed (SSE) or not, answering
conversation turns from a script.

``assay demo --cli`` drives a real CLI with it (``assay.demo.cli_story`` picks the turns by
brief); the real-CLI tests drive every profile with it.

    from assay.demo.upstream import WireFake

    script = [
        {"content": "writing", "tool_calls": [{"name": "Write", "arguments": {...}}]},
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "cat a.txt"}}]},
        {"content": "done"},
    ]
    with WireFake(script) as fake:
        env = {"ANTHROPIC_BASE_URL": fake.url, ...}          # or fake.openai_base_url
        ...
        assert fake.answered == 3                              # conversation turns answered

Routes: ``POST /v1/messages`` (also ``?beta=true``) and ``/v1/messages/count_tokens``
(Anthropic), ``POST /v1/chat/completions`` (OpenAI Chat), ``POST /v1/responses`` (OpenAI
Responses), ``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent`` and
``:countTokens`` (Gemini), ``GET /v1/models``; each also without the ``/v1`` prefix. A body
with ``"stream": true`` (for Gemini, the streaming route) is answered with the API's
server-sent events (see ``wire_render``).

Which scripted turn answers a request: by default (``by="turns"``) the number of assistant
turns already in the request's history, so a resumed CLI that resends a conversation gets
the same answers; ``by="replies"`` the number of the script's own replies in it (aider's
history also holds its few-shot examples and the "Ok." it writes for the model after each
file it adds); ``by="count"`` answers turns in arrival order. A request that is not a
conversation turn (``count_tokens``, a quota probe, title generation, a warm-up, any call
without tools: every CLI here but aider sends its tools with each turn) is a *side
request*: it is answered with ``side_text`` and consumes no turn (``side_answered`` counts
them). Pass ``is_side=`` to classify differently (``toolless_side`` for aider, whose every
call is a turn).

Counters (read them under no lock; they only grow): ``received`` (every request),
``answered`` (conversation turns answered with a completion; alias ``count``),
``side_answered``, ``failures_sent`` (injected faults), ``in_flight``. ``seen`` lists every
request as a ``Seen`` (api, path, body, headers, side reason, turn, stream, status);
``turn_requests()`` the answered conversation turns.

Faults: ``inject(429)`` (any status; ``retry_after=``), ``inject("garbage")`` (a 200 whose
body is not the API's format), ``inject("disconnect")`` (the connection closes before any
answer); each applies to the next conversation request and consumes no turn. ``hold()``
blocks conversation requests inside the server until ``release()`` (``hold(at_turn=k)``
blocks only the request for turn ``k``); ``wait_for_in_flight(n)`` returns once ``n`` are
inside, e.g. to SIGKILL the client mid-call; ``wait_for_answered(n)`` waits for answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

from assay.demo import upstream_wire as render
from assay.demo.loopback import LoopbackServer, QuietHandler
from assay.gateway.apis import REGISTRY, resolve

SideRule = Callable[[str, dict[str, Any]], str | None]

ASSISTANT_ITEMS = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call"}
)


@dataclass
class Seen:
    """One request the fake received."""

    api: str  # an API of assay.gateway.apis, "<api>-count" for a token count, or "other"
    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    side: str | None = None  # why it is not a conversation turn, None for a turn
    turn: int | None = None  # the scripted turn it was answered with
    stream: bool = False
    status: int = 0
    fault: str | None = None


@dataclass
class _Fault:
    kind: int | str
    retry_after: str | None = "0"


def assistant_turns(api: str, body: dict[str, Any]) -> int:
    """Assistant turns in a request's history: runs of consecutive assistant messages (or
    Responses output items), so one turn split over several messages counts once."""
    wire = REGISTRY.get(api.removesuffix("-count"))
    items = body.get(wire.conversation_key if wire is not None else "messages")
    items = items if isinstance(items, list) else []
    if api == "openai-responses":
        flags = [_is_assistant_item(i) for i in items]
    else:  # Gemini's turns are the model's
        flags = [isinstance(m, dict) and m.get("role") in ("assistant", "model") for m in items]
    return sum(1 for i, flag in enumerate(flags) if flag and (i == 0 or not flags[i - 1]))


def _is_assistant_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    return item.get("type") in ASSISTANT_ITEMS or item.get("role") == "assistant"


def default_side(api: str, body: dict[str, Any]) -> str | None:
    """Why a request is a side request (None for a conversation turn)."""
    if api.endswith("-count"):
        return "count_tokens"
    if api == "anthropic" and body.get("max_tokens") == 1:
        return "quota probe"
    if not body.get("tools"):
        return "no tools"
    return None


def toolless_side(api: str, body: dict[str, Any]) -> str | None:
    """``default_side`` for a CLI that never sends tools (aider): only token counts and
    quota probes are side requests."""
    reason = default_side(api, body)
    return None if reason == "no tools" else reason


def scripted_replies(body: dict[str, Any], script: Sequence[dict[str, Any]]) -> int:
    """How many of a chat request's assistant messages are one of ``script``'s texts."""
    texts = {str(t["content"]).strip() for t in script if t.get("content")}
    messages = body.get("messages")
    return sum(
        1
        for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, dict)
        and m.get("role") == "assistant"
        and isinstance(m.get("content"), str)
        and m["content"].strip() in texts
    )


class WireFake(LoopbackServer):
    """The scripted upstream (see the module docstring)."""

    def __init__(
        self,
        script: Sequence[dict[str, Any]],
        *,
        by: str = "turns",
        model: str = "fake-model",
        side_text: str = "ok",
        is_side: SideRule = default_side,
    ) -> None:
        if by not in ("turns", "replies", "count"):
            raise ValueError(f"by must be 'turns', 'replies' or 'count', not {by!r}")
        super().__init__()
        self.script = list(script)
        self.by = by
        self.model = model
        self.side_text = side_text
        self.is_side = is_side
        self.received = 0
        self.answered = 0
        self.side_answered = 0
        self.failures_sent = 0
        self.in_flight = 0
        self.seen: list[Seen] = []
        self._faults: list[_Fault] = []
        self._hold: tuple[bool, int | None] = (False, None)
        self._mid_stream = False  # a held streamed answer is held after its first event

    @classmethod
    def from_script(cls, path: Path, **options: Any) -> WireFake:
        """A fake answering a YAML file's ``turns`` (or ``responses``) list."""
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return cls(data.get("turns", data.get("responses")), **options)

    # -- life cycle (``url``, ``start``, ``stop``: ``LoopbackServer``) ----------------------

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: OpenAI clients' base URL."""
        return f"{self.url}/v1"

    @property
    def count(self) -> int:
        """Conversation turns answered (the name the other fakes use)."""
        return self.answered

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"fake": self})

    # -- control --------------------------------------------------------------------------

    def inject(self, kind: int | str, *, times: int = 1, retry_after: str | None = "0") -> None:
        """Answer the next ``times`` conversation requests with a fault (see the docstring)."""
        if not isinstance(kind, int) and kind not in ("garbage", "disconnect"):
            raise ValueError(f"unknown fault {kind!r}")
        with self._lock:
            self._faults.extend(_Fault(kind, retry_after) for _ in range(times))

    def hold(self, *, at_turn: int | None = None, mid_stream: bool = False) -> None:
        """Block conversation requests (only turn ``at_turn`` when given) until release();
        ``mid_stream``: a streamed answer is held after its first event was sent (the
        client is in the middle of reading it), any other before it is answered."""
        with self._lock:
            self._hold = (True, at_turn)
            self._mid_stream = mid_stream

    def release(self) -> None:
        with self._lock:
            self._hold = (False, None)
            self._mid_stream = False
            self._lock.notify_all()

    def wait_for_in_flight(self, n: int = 1, *, timeout: float = 30.0) -> None:
        """Block until at least ``n`` conversation requests are inside the server."""
        self._wait(
            lambda: self.in_flight >= n, timeout, lambda: f"{self.in_flight} of {n} in flight"
        )

    def wait_for_answered(self, n: int, *, timeout: float = 30.0) -> None:
        """Block until at least ``n`` conversation turns were answered."""
        self._wait(lambda: self.answered >= n, timeout, lambda: f"{self.answered} of {n} answered")

    wait_for_count = wait_for_answered

    def turn_requests(self) -> list[Seen]:
        """The conversation requests answered with a scripted turn, in arrival order."""
        with self._lock:
            return [s for s in self.seen if s.turn is not None and s.status == 200]

    # -- one request ----------------------------------------------------------------------

    def answer(self, seen: Seen) -> tuple[_Fault | None, dict[str, Any] | None]:
        """Decide a request's answer: a fault, a scripted turn (or side reply), or None
        with ``seen.status`` set for an error. Blocks while the request is held."""
        with self._lock:
            self.received += 1
            self.seen.append(seen)
            seen.side = self.is_side(seen.api, seen.body)
            if seen.side is not None:
                self.side_answered += 1
                seen.status = 200
                self.on_side(seen)
                return None, {"content": self.side_text}
            if self._faults:
                fault = self._faults.pop(0)
                self.failures_sent += 1
                seen.fault = str(fault.kind)
                return fault, None
            turn = self._turn_of(seen)
            seen.turn = turn
            self.on_request(seen)
            if not (seen.stream and self._mid_stream):
                self._wait_held(seen)
            if self.dropped(seen):
                seen.fault = "disconnect"
                return _Fault("disconnect"), None
            script = self.script_for(seen)
            if turn >= len(script):
                seen.status = 400
                return None, None
            self.answered += 1
            seen.status = 200
            self.on_answer(seen)
            self._lock.notify_all()
            return None, script[turn]

    def _turn_of(self, seen: Seen) -> int:
        if self.by == "turns":
            return assistant_turns(seen.api, seen.body)
        if self.by == "replies":
            return scripted_replies(seen.body, self.script_for(seen))
        return self.answered

    def wait_mid_stream(self, seen: Seen) -> None:
        """Called after a streamed answer's first event: hold it there (``mid_stream``)."""
        with self._lock:
            if self._mid_stream:
                self._wait_held(seen)

    def _wait_held(self, seen: Seen) -> None:
        """Wait while ``seen`` is held (the lock held), counted in ``in_flight``."""
        self.in_flight += 1
        self._lock.notify_all()
        try:
            while self.held(seen):
                self._lock.wait()
        finally:
            self.in_flight -= 1

    # -- what a subclass may decide (each called under the lock) ---------------------------

    def script_for(self, seen: Seen) -> Sequence[dict[str, Any]]:
        """The turns that answer this request's conversation: the one script here."""
        return self.script

    def held(self, seen: Seen) -> bool:
        """Whether the request waits inside the server (``hold``) for now."""
        return self._hold[0] and self._hold[1] in (None, seen.turn)

    def dropped(self, seen: Seen) -> bool:
        """Whether a request let go of is closed unanswered instead (never, here)."""
        return False

    def on_request(self, seen: Seen) -> None:
        """Called once per conversation request received (its turn known), before any
        hold: a request counts whether or not it is ever answered."""

    def on_answer(self, seen: Seen) -> None:
        """Called once per conversation turn answered, before the answer is sent."""

    def on_side(self, seen: Seen) -> None:
        """Called once per side request answered (a title, a token count)."""


def _route(method: str, path: str) -> tuple[str, str]:
    """``(the API's label, the route)``: an API of the registry (``<api>-count`` for a
    token count), found with or without the ``/v1`` prefix, or ``other``."""
    bare = path.split("?", 1)[0].rstrip("/")
    for route in (bare, "/v1" + bare):
        wire = resolve(route) if method == "POST" else None
        if wire is not None:
            return (f"{wire.name}-count" if wire.counts_tokens(route) else wire.name), route
    return "other", bare


class _Handler(QuietHandler):
    fake: WireFake  # bound by ``WireFake.handler``

    def do_GET(self) -> None:
        self._other("GET")

    def do_HEAD(self) -> None:
        self._other("HEAD")

    def do_POST(self) -> None:
        api, route = _route("POST", self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if api == "other" or not isinstance(body, dict):
            self._other("POST", raw)
            return
        wire = REGISTRY.get(api.removesuffix("-count"))
        stream = wire.streams(route, body) if wire is not None else False
        seen = Seen(api, "POST", self.path, body, headers, stream=stream)
        fault, turn = self.fake.answer(seen)
        if fault is not None:
            self._fault(seen, fault)
        elif turn is None:
            message = f"no scripted turn {seen.turn} in {len(self.fake.script_for(seen))}"
            self._json(400, _error(api, message))
        else:
            self._reply(seen, turn)

    def _other(self, method: str, raw: bytes = b"") -> None:
        with self.fake._lock:
            self.fake.received += 1
            seen = Seen(
                "other",
                method,
                self.path,
                {"raw": raw.decode(errors="replace")},
                {k.lower(): v for k, v in self.headers.items()},
                status=404,
            )
            self.fake.seen.append(seen)
        if method == "GET" and self.path.split("?")[0].rstrip("/") in ("/v1/models", "/models"):
            seen.status = 200
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.fake.model,
                            "object": "model",
                            "created": render.CREATED,
                            "owned_by": "fake",
                        }
                    ],
                },
            )
            return
        self._json(404, {"error": {"message": f"no route {method} {self.path}"}})

    def _fault(self, seen: Seen, fault: _Fault) -> None:
        if fault.kind == "disconnect":
            self.close_connection = True
            self.connection.shutdown(2)  # SHUT_RDWR: no status line at all
            return
        if fault.kind == "garbage":
            seen.status = 200
            kind = "text/event-stream" if seen.stream else "application/json"
            self._send(200, kind, b"data: {not json\n\n" if seen.stream else b"<html>{not json")
            return
        assert isinstance(fault.kind, int)
        seen.status = fault.kind
        extra = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
        self._json(fault.kind, _error(seen.api, "injected failure"), extra)

    def _reply(self, seen: Seen, turn: dict[str, Any]) -> None:
        number = seen.turn if seen.turn is not None else 9000 + self.fake.side_answered
        whole, events = _render(seen, turn, number, self.fake.model)
        if seen.stream:
            self._stream(events, seen)
        else:
            self._json(200, whole)

    def _json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        self._send(status, "application/json", json.dumps(payload).encode(), extra)

    def _send(
        self, status: int, kind: str, data: bytes, extra: dict[str, str] | None = None
    ) -> None:
        super()._send(status, kind, data, {"request-id": "req_fake", **(extra or {})})

    def _stream(self, events: Iterable[render.Event], seen: Seen) -> None:
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for index, event in enumerate(events):
                chunk = render.sse(event)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                if index == 0:
                    self.fake.wait_mid_stream(seen)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def _render(
    seen: Seen, turn: dict[str, Any], number: int, model: str
) -> tuple[dict[str, Any], Iterable[render.Event]]:
    if seen.api == "anthropic-count":
        return {"input_tokens": render.usage(turn)[0]}, iter(())
    if seen.api == "gemini-count":
        return {"totalTokens": render.usage(turn)[0]}, iter(())
    if seen.api == "gemini":
        reply = render.gemini_response(turn, number, model)
        return reply, render.gemini_events(reply)
    if seen.api == "anthropic":
        message = render.anthropic_message(turn, number, model)
        return message, render.anthropic_events(message)
    if seen.api == "openai-chat":
        completion = render.chat_completion(turn, number, model)
        include = bool((seen.body.get("stream_options") or {}).get("include_usage"))
        return completion, render.chat_events(completion, include_usage=include)
    response = render.responses_object(turn, number, model)
    return response, render.responses_events(response)


def _error(api: str, message: str) -> dict[str, Any]:
    if api.startswith("gemini"):
        return {"error": {"code": 500, "message": message, "status": "INTERNAL"}}
    if api.startswith("anthropic"):
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "server_error", "code": None}}


__all__ = ["Seen", "WireFake", "assistant_turns", "default_side"]
