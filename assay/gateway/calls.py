"""From a CLI's HTTP request to a journaled model call, on the run thread.

``CallHandler.handle(call)`` turns a ``ModelCall`` into a ``WireRequest`` (conversation
split out for content addressing, normalised digest for matching, the tool calls the
agent completed since the last call), asks the ``WireSession`` for the answer (recorded,
or forwarded upstream with any steering added) and sends it to the CLI. When the answer
must not reach the CLI, the CLI gets an error in its own API's shape and the run stops:
an undeclared tool in the answer (``Denied``, 77), a spent budget (``Paused``, 7), an
upstream that stays down (``Unavailable``, 69) or refuses the key (``Denied``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from assay.errors import AssayError, Denied, Paused, Unavailable
from assay.gateway.apis import Said
from assay.gateway.server import ModelCall
from assay.gateway.transcript import read_said
from assay.gateway.upstream import Reply, Upstream
from assay.gateway.volatile import Mask
from assay.gateway.wire import (
    MARKERS,
    digest,
    first_difference,
    join,
    matching_masks,
    normalise,
    preview,
    split,
    tool_pairs,
    with_steering,
)
from assay.models.config import Price
from assay.runtime.types import Event
from assay.runtime.wire import WireReply, WireRequest, WireSession

STEERING_PREFIX = "Steering from {actor}: "
Normaliser = Callable[[str, dict[str, Any]], dict[str, Any]]
MCP_PREFIXES = ("mcp__assay__", "mcp_assay_", "assay__", "assay_", "assay.", "assay/")


def tool_allowed(name: str, declared: Iterable[str], mcp_tools: Iterable[str]) -> bool:
    """A tool the desk declares: one of its ``tools``, or one of Assay's MCP tools under
    the names CLIs give MCP tools (Claude Code's ``mcp__assay__finish``, Gemini CLI's
    ``mcp_assay_finish``, OpenCode's ``assay_finish``, ``assay__finish``); a bare
    ``finish`` could be any CLI's own tool, so it counts only when declared."""
    if name in set(declared):
        return True
    offered = set(mcp_tools)
    return any(name.startswith(p) and name[len(p) :] in offered for p in MCP_PREFIXES)


def matching_body(
    api: str,
    body: dict[str, Any],
    *,
    masks: tuple[Mask, ...] = (),
    extra: Normaliser | None = None,
    steady: list[Any] | None = None,
) -> dict[str, Any]:
    """What a request is matched on: the gateway's normalisation with ``masks`` applied to
    its tool results, then the profile's own (``extra``: ``CliProfile.normalise``);
    ``steady`` as ``normalise`` takes it."""
    value = normalise(api, body, masks, steady=steady)
    return extra(api, value) if extra else value


class CallHandler:
    """Answers the CLI's model calls through one ``WireSession``.

    ``masks`` are the volatile parts of tool output (the profile's and the desk's,
    ``CliProfile.output_masks``): masked in the matching digest and in the comparison that
    names a divergence, never in what goes upstream or into the journal. ``rewrite``: what
    a natively resumed CLI's requests are taken as before anything else (its resume turns
    taken out, ``CliProfile.resumed_request``): that is what is matched, recorded and sent
    upstream.

    A CLI sends its whole conversation with every call: what the work on each item found
    (masked for matching, its tool calls and results) is remembered in the session's
    ``ConversationMemo`` (``assay.runtime.memo``), so a call's cost is that of its new items."""

    def __init__(
        self,
        session: WireSession,
        upstream: Upstream,
        *,
        price: Price,
        allowed: Callable[[str], bool],
        normalise_extra: Normaliser | None = None,
        masks: tuple[Mask, ...] = (),
        toolless_turns: bool = False,
        rewrite: Normaliser | None = None,
    ) -> None:
        self.session = session
        self.upstream = upstream
        self.price = price
        self.allowed = allowed
        self.normalise_extra = normalise_extra
        self.masks = masks
        self.toolless_turns = toolless_turns
        self.rewrite = rewrite
        self.seen_tools: set[str] = set()
        self.calls = 0
        self.replayed = 0
        self.last: tuple[str, WireReply] | None = None  # the last turn's API and answer
        self.found = matching_masks(masks)
        # What the masks make of an item is remembered under their patterns.
        self.steady_kind = (
            "steady",
            tuple((m.pattern.pattern, m.pattern.flags, m.replacement) for m in masks),
        )

    def normal(
        self, api: str, body: dict[str, Any], *, steady: list[Any] | None = None
    ) -> dict[str, Any]:
        return matching_body(api, body, masks=self.masks, extra=self.normalise_extra, steady=steady)

    def request_of(self, call: ModelCall) -> WireRequest:
        wire = call.wire
        items, rest = split(call.api, call.body)
        known = self.session.memo.conversation(items)
        steady = None
        if isinstance(call.body.get(wire.conversation_key), list):  # ``items`` is that list
            steady = known.each(
                (*self.steady_kind, call.api), lambda item: wire.steady_results(item, self.found)
            )
        normal = self.normal(call.api, call.body, steady=steady)
        tools = known.each(("tools", call.api), wire.item_tools)
        fresh = []
        for pair in tool_pairs(call.api, items, tools=tools):
            if pair["id"] not in self.seen_tools:
                self.seen_tools.add(pair["id"])
                fresh.append(
                    {
                        "id": pair["id"],
                        "name": pair["name"],
                        "input": preview(pair.get("input")),
                        "output": preview(pair.get("output")),
                        "error": bool(pair.get("error")),
                    }
                )
        return WireRequest(
            api=call.api,
            route=call.route,
            items=items,
            rest=rest,
            digest=digest(call.route, normal),
            stream=call.stream,
            tools=fresh,
            steerable=self.is_turn(call),
            marks=MARKERS[call.api],
            conversation=known,
        )

    def is_turn(self, call: ModelCall) -> bool:
        """Whether a call is a conversation turn (matched strictly on resume, open to
        steering) rather than a side request a resume may skip: it offers tools, or its
        CLI never does (``toolless_turns``: aider); a token count never is."""
        if call.wire.counts_tokens(call.route):
            return False
        return self.toolless_turns or bool(call.body.get("tools"))

    def difference(self, recorded: dict[str, Any], request: WireRequest) -> str:
        api = request.api
        current = join(api, request.items, request.rest)
        left, right = self.normal(api, recorded), self.normal(api, current)
        found = first_difference(left, right)
        if found is None:
            return ""
        return found + _excerpts(_at(left, found), _at(right, found))

    def handle(self, call: ModelCall, headers: dict[str, str] | None = None) -> WireReply:
        """Answer ``call``; raise (after answering the CLI) when the run must stop."""
        self.calls += 1
        if self.rewrite is not None:
            call.body = self.rewrite(call.api, call.body)
        request = self.request_of(call)

        def forward(req: WireRequest, steer: list[Event]) -> WireReply:
            return self.forward(call, req, steer)

        try:
            reply = self.session.call(request, forward, check=self.check)
        except Paused as paused:
            call.refuse(400, "invalid_request_error", f"assay: {paused.message}")
            raise
        except Unavailable as down:
            call.refuse(call.wire.overload_status, "overloaded_error", down.message)
            raise
        except AssayError as error:
            call.refuse(403, "permission_error", f"assay: {error.message}")
            raise
        if reply.replayed:
            self.replayed += 1
        if reply.denied is not None:
            call.refuse(403, "permission_error", f"assay: {reply.denied}")
            raise Denied(reply.denied)
        call.answer(Reply(reply.status, reply.content_type, reply.body, reply.stream))
        if request.steerable:
            self.last = (call.api, reply)
        return reply

    def last_said(self) -> Said | None:
        """What the model said in the last conversation answer the CLI got (replayed or
        live; a side request's is not one)."""
        if self.last is None:
            return None
        api, reply = self.last
        return read_said(api, reply.body, stream=reply.stream)

    def check(self, reply: WireReply) -> str | None:
        refused = [name for name in reply.tool_names if not self.allowed(name)]
        if not refused:
            return None
        names = ", ".join(repr(n) for n in refused)
        return f"the model called {names}, which this desk does not declare in tools"

    def forward(self, call: ModelCall, request: WireRequest, steer: list[Event]) -> WireReply:
        items = request.items
        for event in steer:
            actor = event.actor or "a human"
            items = with_steering(call.api, items, STEERING_PREFIX.format(actor=actor) + event.text)
        body = call.wire.forwarded(join(call.api, items, request.rest), stream=call.stream)
        reply, answer = self.upstream.forward(call.api, call.route, body, call.headers)
        in_tokens = answer.in_tokens if answer else 0
        out_tokens = answer.out_tokens if answer else 0
        return WireReply(
            status=reply.status,
            content_type=reply.content_type,
            body=reply.body,
            stream=reply.stream,
            in_tokens=in_tokens,
            out_tokens=out_tokens,
            usd=0.0
            if call.wire.counts_tokens(call.route)
            else self.price.usd(in_tokens, out_tokens),
            model=answer.model if answer else "",
            tool_names=tuple(t.name for t in answer.tools) if answer else (),
        )


def _at(value: Any, path: str) -> Any:
    """The value at a ``first_difference`` path (``messages[2].content``), or None."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            value = value[index] if isinstance(value, list) and index < len(value) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value


def _excerpts(recorded: Any, asked: Any, width: int = 40) -> str:
    """Where two differing strings part: ``: recorded '…ab', asked '…ac'``."""
    if not isinstance(recorded, str) or not isinstance(asked, str):
        return ""
    at = next(
        (i for i, (a, b) in enumerate(zip(recorded, asked, strict=False)) if a != b),
        min(len(recorded), len(asked)),
    )
    start = max(0, at - width // 2)
    return f": recorded {recorded[start : at + width]!r}, asked {asked[start : at + width]!r}"
