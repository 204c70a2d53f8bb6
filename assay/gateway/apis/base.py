"""``WireApi``: what the gateway, the journal and the scripted upstream need to know of one
wire API, behind one interface; each API is one subclass (``assay.gateway.apis``).

The gateway passes request and response bodies through untouched; per API it needs: its
routes (patterns, the model in the path for Gemini) and whether a route streams or counts
tokens, where the conversation is in a request (``conversation_key``: it is
content-addressed), which per-request markers its items carry (set aside before content
addressing), what is volatile in a request (so a resumed CLI's request matches the recorded
one), the usage and the tool calls in a response (for cost, and to refuse an undeclared
tool), what the model said (for views), the tool-use/tool-result pairs in a request (what
the agent did), how steering is added, what an error body looks like (so a CLI shows the
gateway's refusals the way it shows its model's), the headers its key comes in and the
status it answers "overloaded" with.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from assay.gateway.volatile import Mask, mask_text

# One item's tool calls ({id, name, input}) and tool results ((id, output, error)).
ItemTools = tuple[list[dict[str, Any]], list[tuple[str, Any, bool]]]


@dataclass(frozen=True)
class RoutePattern:
    """One route of an API: a path pattern (``model`` group: the model in the path),
    whether it streams whatever the body says (``stream``: True, False or None for the
    body's ``stream``), and whether it only counts tokens (never a turn, never priced)."""

    pattern: re.Pattern[str]
    stream: bool | None = None
    counts_tokens: bool = False
    shown: str = ""  # as a person reads it (the pattern's text when empty)


@dataclass(frozen=True)
class ToolUse:
    """One tool call in a model response."""

    id: str
    name: str


@dataclass(frozen=True)
class Answer:
    """What the gateway reads from a model response: usage, model, the tool calls."""

    in_tokens: int
    out_tokens: int
    model: str
    tools: tuple[ToolUse, ...]


@dataclass(frozen=True)
class Said:
    """A model answer as a person reads it: text, and each tool call with its arguments."""

    text: str = ""
    calls: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # {name, arguments}

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "tool_calls": [dict(call) for call in self.calls]}


class WireApi:
    """One wire API (see the module docstring); subclasses set the class attributes and
    override what their shapes need."""

    name: ClassVar[str]
    title: ClassVar[str]  # for messages: "the Gemini API"
    routes: ClassVar[tuple[RoutePattern, ...]]
    conversation_key: ClassVar[str] = "messages"
    # Keys a CLI adds to and drops from conversation items between requests, for the API's
    # prompt cache (``cache_control``): set aside before content addressing, put back
    # exactly by storage (assay.runtime.marks), so a key never sent costs nothing.
    markers: ClassVar[tuple[str, ...]] = ("cache_control",)
    # Top-level request fields that identify a request or a user, never what is asked.
    volatile_top: ClassVar[tuple[str, ...]] = ("metadata",)
    auth_headers: ClassVar[tuple[str, ...]] = ("x-api-key", "authorization")
    overload_status: ClassVar[int] = 503
    adapter: ClassVar[str]  # the ``model.adapter`` whose endpoint speaks this API
    # Paths of the API beyond the routes served (to name the API when one is asked for).
    family: ClassVar[re.Pattern[str] | None] = None

    # -- routes -------------------------------------------------------------------------

    def route_of(self, path: str) -> RoutePattern | None:
        return next((r for r in self.routes if r.pattern.fullmatch(path)), None)

    def looks_like(self, path: str) -> bool:
        return self.family is not None and self.family.match(path) is not None

    def streams(self, route: str, body: dict[str, Any]) -> bool:
        found = self.route_of(route)
        if found is not None and found.stream is not None:
            return found.stream
        return bool(body.get("stream"))

    def counts_tokens(self, route: str) -> bool:
        found = self.route_of(route)
        return found is not None and found.counts_tokens

    def served(self) -> list[str]:
        """The routes as a person reads them (for the unrouted message)."""
        return [r.shown or r.pattern.pattern for r in self.routes]

    def forwarded(self, body: dict[str, Any], *, stream: bool) -> dict[str, Any]:
        """The body the gateway sends on (what the gateway needs asked for, added)."""
        return body

    def upstream_request(
        self, route: str, body: dict[str, Any], model: str
    ) -> tuple[str, dict[str, Any]]:
        """The path and body sent upstream: the desk's model in place of the CLI's."""
        return route, {**body, "model": model}

    # -- the conversation ---------------------------------------------------------------

    def split(self, body: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """``(conversation items, the rest of the body)``; a string is one item."""
        key = self.conversation_key
        items = body.get(key)
        rest = {k: v for k, v in body.items() if k != key}
        if isinstance(items, str):
            return [{"role": "user", "content": items, "assay_string_input": True}], rest
        return (list(items) if isinstance(items, list) else []), rest

    def join(self, items: list[Any], rest: dict[str, Any]) -> dict[str, Any]:
        """The inverse of ``split``."""
        body = dict(rest)
        marked = [isinstance(i, dict) and bool(i.get("assay_string_input")) for i in items]
        if marked == [True]:
            body[self.conversation_key] = items[0]["content"]
        else:
            body[self.conversation_key] = [
                {k: v for k, v in i.items() if k != "assay_string_input"} if m else i
                for i, m in zip(items, marked, strict=True)
            ]
        return body

    def normalise(
        self, body: dict[str, Any], found: tuple[Mask, ...], *, steady: list[Any] | None = None
    ) -> dict[str, Any]:
        """The request without what changes between two runs of one CLI step: the
        ``volatile_top`` fields, ``stream_options``, and ``found`` masked in tool results
        (``normalise_rest`` may take out more). ``steady``: the conversation's items with
        ``found`` masked (``steady_results`` of each), when the caller has them already."""
        out = dict(body)  # a shallow copy: only top-level fields are replaced
        for name in self.volatile_top:
            out.pop(name, None)
        out.pop("stream_options", None)
        key = self.conversation_key
        if isinstance(out.get(key), list):
            if steady is None:
                steady = [self.steady_results(item, found) for item in out[key]]
            out[key] = steady
        return self.normalise_rest(out)

    def normalise_rest(self, body: dict[str, Any]) -> dict[str, Any]:
        return body

    def steady_results(self, item: Any, found: tuple[Mask, ...]) -> Any:
        """``item`` with ``found`` masked in its tool results (the item itself when it holds
        none)."""
        return item

    def with_steering(self, items: list[Any], text: str) -> list[Any]:
        """The conversation with ``text`` added as a user message at its end."""
        return [*items, {"role": "user", "content": text}]

    # -- responses ----------------------------------------------------------------------

    def read_answer(self, objects: list[dict[str, Any]]) -> Answer:
        raise NotImplementedError

    def said(self, objects: list[dict[str, Any]]) -> Said:
        raise NotImplementedError

    # -- what the agent did -------------------------------------------------------------

    def tool_pairs(
        self, items: list[Any], *, tools: list[ItemTools] | None = None
    ) -> list[dict[str, Any]]:
        """Every completed tool call in a conversation: ``{id, name, input, output, error}``:
        the model's call paired with the CLI's result that answers it. ``tools``: each
        item's ``item_tools``, when the caller has them already."""
        if tools is None:
            tools = [self.item_tools(item) for item in items]
        calls: dict[str, dict[str, Any]] = {}
        done: dict[str, dict[str, Any]] = {}  # in the order their results came
        for called, results in tools:
            for call in called:
                calls.setdefault(call["id"], call)
            for ident, output, error in results:
                if ident in calls and ident not in done:  # a new dict: ``tools`` is shared
                    done[ident] = {**calls[ident], "output": output, "error": error}
        return list(done.values())

    def item_tools(self, item: Any) -> ItemTools:
        """The tool calls and the tool results one conversation item holds."""
        if not isinstance(item, dict):
            return [], []
        return self.calls_in(item), self.results_in(item)

    def calls_in(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        return []

    def results_in(self, item: dict[str, Any]) -> list[tuple[str, Any, bool]]:
        return []

    # -- errors -------------------------------------------------------------------------

    def error_body(self, kind: str, message: str, status: int) -> dict[str, Any]:
        """An error response body in the API's own shape (``kind`` e.g. ``permission_error``)."""
        return {"error": {"type": kind, "code": kind, "message": message, "param": None}}


# ------------------------------------------------------------------------- helpers


def as_int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def steady(value: Any, found: tuple[Mask, ...]) -> Any:
    """A tool result (text, or a list of content parts) with ``found`` masked."""
    if isinstance(value, str):
        return mask_text(value, found)
    if isinstance(value, list):
        return [
            {**part, "text": mask_text(part["text"], found)}
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else part
            for part in value
        ]
    return value


def text_of(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        parts = [
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in value
        ]
        return "".join(parts)
    return json.dumps(value, sort_keys=True, default=str)


def call_of(name: Any, arguments: Any) -> dict[str, Any]:
    """A tool call, its arguments parsed when they are a JSON string."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    return {"name": str(name or ""), "arguments": arguments}
