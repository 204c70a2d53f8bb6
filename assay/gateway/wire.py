"""The three wire APIs agent CLIs speak, as far as the gateway needs to understand them.

The gateway passes request and response bodies through untouched; it only needs to know,
per API: where the conversation is in a request (so it can be content-addressed), which
per-request markers its items carry (set aside before content addressing), what
is volatile in a request (so a resumed CLI's request matches the recorded one), the
usage and the tool calls in a response (for cost, and to refuse an undeclared tool), the
tool-use/tool-result pairs in a request (what the agent did), and what an error body
looks like (so a CLI shows the gateway's refusals the way it shows its model's).

APIs: ``anthropic`` (``/v1/messages``, ``/v1/messages/count_tokens``), ``openai-chat``
(``/v1/chat/completions``), ``openai-responses`` (``/v1/responses``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from assay.gateway.volatile import RUNNER_TIMES, Mask, mask_text
from assay.journal.format import canonical
from assay.runtime.wire import first_difference as first_difference  # re-exported

Api = Literal["anthropic", "openai-chat", "openai-responses"]
APIS: tuple[Api, ...] = ("anthropic", "openai-chat", "openai-responses")

ROUTES: dict[str, Api] = {
    "/v1/messages": "anthropic",
    "/v1/messages/count_tokens": "anthropic",
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
}
COUNT_TOKENS = "/v1/messages/count_tokens"

# Paths of wire APIs a CLI may speak, to name in the answer to a route the gateway does not
# serve: a CLI shows the error body's message, so it must say what to change.
_LOOKS_LIKE = ((re.compile(r"^/v1(beta|alpha)?\d*/models/[^/]+:\w+$"), "gemini", "the Gemini API"),)


def no_route(method: str, path: str) -> tuple[str, str]:
    """``(the API the path looks like, or "", the message)`` for a route not served."""
    for pattern, api, title in _LOOKS_LIKE:
        if pattern.search(path):
            return api, (
                f"no gateway route for {method} {path}: the desk's CLI speaks {title}; "
                f"use `cli.api: {api}`"
            )
    served = ", ".join(f"POST {route}" for route in ROUTES)
    return "", f"no gateway route for {method} {path}: the gateway serves {served}"


# Claude Code puts a per-request attribution/billing line in its system prompt (a hash
# of the request); it is the one part of an otherwise stable system prompt that changes.
_BILLING = re.compile(r"x-anthropic-billing-header:[^\n]*\n?")
# Claude Code snapshots `git status` and the recent commits into its system prompt; a
# resumed CLI sees the desk's own durability commits there, so the snapshot is volatile.
_GIT_STATUS = re.compile(r"gitStatus: .*", re.DOTALL)
# Top-level request fields that identify a request or a user, never what is asked.
_VOLATILE = {
    "anthropic": ("metadata",),
    "openai-chat": ("user", "metadata", "prompt_cache_key", "safety_identifier"),
    "openai-responses": (
        "user",
        "metadata",
        "prompt_cache_key",
        "safety_identifier",
        "previous_response_id",
    ),
}

# Keys a CLI adds to and drops from conversation items between requests, for the API's
# prompt cache: Claude Code marks the last block of each request's last message with
# `cache_control`; proxies offering Anthropic models over the chat API (OpenRouter, LiteLLM)
# take the same key on chat content parts. OpenAI's own APIs have no per-item marker (their
# prompt cache is automatic; `prompt_cache_key` is top-level and volatile above), so the key
# is set aside on every API: storage puts it back exactly, so a key never sent costs nothing.
# The journal stores items without these and each request's marks in its context node, so
# a message is stored once and a node extends the previous one (assay.runtime.marks).
MARKERS: dict[Api, tuple[str, ...]] = {api: ("cache_control",) for api in APIS}


def conversation_key(api: Api) -> str:
    """The request field holding the conversation."""
    return "input" if api == "openai-responses" else "messages"


def split(api: Api, body: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``(conversation items, the rest of the body)``; a string ``input`` is one item."""
    key = conversation_key(api)
    items = body.get(key)
    rest = {k: v for k, v in body.items() if k != key}
    if isinstance(items, str):
        return [{"role": "user", "content": items, "assay_string_input": True}], rest
    return (list(items) if isinstance(items, list) else []), rest


def join(api: Api, items: list[Any], rest: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``split``."""
    body = dict(rest)
    marked = [isinstance(i, dict) and bool(i.get("assay_string_input")) for i in items]
    if marked == [True]:
        body[conversation_key(api)] = items[0]["content"]
    else:
        body[conversation_key(api)] = [
            {k: v for k, v in i.items() if k != "assay_string_input"} if m else i
            for i, m in zip(items, marked, strict=True)
        ]
    return body


def normalise(api: Api, body: dict[str, Any], masks: tuple[Mask, ...] = ()) -> dict[str, Any]:
    """The request with what changes between two runs of the same CLI step removed.

    Dropped: the top-level identifying fields of ``_VOLATILE`` (``metadata`` carries
    Claude Code's per-session user id), Claude Code's billing line and its ``gitStatus``
    snapshot in ``system``, the ``stream_options`` of a chat request; masked, in tool
    results only (never in the instructions or in what the model said): the run times test
    runners print (``RUNNER_TIMES``) and every match of ``masks`` (the profile's and the
    desk's volatile output, ``assay.gateway.volatile``). Everything else must match exactly
    (a profile's ``normalise`` may drop more).
    """
    found = RUNNER_TIMES + tuple(masks)
    out = dict(body)  # a shallow copy: only top-level fields and `system` are replaced
    for name in _VOLATILE[api]:
        out.pop(name, None)
    out.pop("stream_options", None)
    key = conversation_key(api)
    if isinstance(out.get(key), list):
        out[key] = [_steady_results(api, item, found) for item in out[key]]
    if api == "anthropic":
        system = out.get("system")
        if isinstance(system, str):
            out["system"] = _system_text(system)
        elif isinstance(system, list):
            kept = []
            for block in system:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    text = _system_text(block["text"])
                    if not text.strip():
                        continue
                    block = {**block, "text": text}
                kept.append(block)
            out["system"] = kept
    return out


def _steady_results(api: Api, item: Any, found: tuple[Mask, ...]) -> Any:
    """``item`` with ``found`` masked in its tool results (a copy when it holds any; the
    item itself otherwise)."""
    if not isinstance(item, dict):
        return item
    if api == "anthropic" and isinstance(item.get("content"), list):
        blocks = [
            {**block, "content": _steady(block.get("content"), found)}
            if isinstance(block, dict) and block.get("type") == "tool_result"
            else block
            for block in item["content"]
        ]
        return {**item, "content": blocks}
    if api == "openai-chat" and item.get("role") == "tool":
        return {**item, "content": _steady(item.get("content"), found)}
    if api == "openai-responses" and item.get("type") in (
        "function_call_output",
        "custom_tool_call_output",
    ):
        return {**item, "output": _steady(item.get("output"), found)}
    return item


def _steady(value: Any, found: tuple[Mask, ...]) -> Any:
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


def _system_text(text: str) -> str:
    return _GIT_STATUS.sub("gitStatus: (volatile)", _BILLING.sub("", text))


def digest(route: str, normal: dict[str, Any]) -> str:
    """The matching key of a normalised request on a route."""
    data = canonical({"route": route, "body": normal}).encode("ascii")
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------- responses


def sse_events(raw: bytes) -> list[tuple[str, str]]:
    """``(event name, data)`` of each event of a ``text/event-stream`` body."""
    events: list[tuple[str, str]] = []
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        name, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if name or data:
            events.append((name, "\n".join(data)))
    return events


def _json_events(raw: bytes) -> list[dict[str, Any]]:
    found = []
    for _, data in sse_events(raw):
        if data and data != "[DONE]":
            try:
                value = json.loads(data)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


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


def read_answer(api: Api, body: bytes, *, stream: bool) -> Answer | None:
    """Usage and tool calls of a 2xx response body, or None when it is not one of ``api``'s."""
    try:
        objects = _json_events(body) if stream else [json.loads(body)]
    except ValueError:
        return None
    if not objects or not all(isinstance(o, dict) for o in objects):
        return None
    if api == "anthropic":
        return _anthropic_answer(objects)
    if api == "openai-chat":
        return _chat_answer(objects)
    return _responses_answer(objects)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _anthropic_answer(objects: list[dict[str, Any]]) -> Answer:
    in_t = out_t = 0
    model = ""
    tools: list[ToolUse] = []
    for obj in objects:
        message = obj.get("message") if obj.get("type") == "message_start" else obj
        if isinstance(message, dict):
            usage = message.get("usage") or {}
            if isinstance(usage, dict):
                in_t += sum(
                    _int(usage.get(k))
                    for k in (
                        "input_tokens",
                        "cache_read_input_tokens",
                        "cache_creation_input_tokens",
                    )
                )
                out_t = max(out_t, _int(usage.get("output_tokens")))
            model = str(message.get("model") or model)
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                    tools.append(ToolUse(str(block.get("id", "")), str(block.get("name", ""))))
        block = obj.get("content_block")
        started = obj.get("type") == "content_block_start" and isinstance(block, dict)
        if (
            started
            and isinstance(block, dict)
            and block.get("type") in ("tool_use", "server_tool_use")
        ):
            tools.append(ToolUse(str(block.get("id", "")), str(block.get("name", ""))))
        if obj.get("type") == "message_delta" and isinstance(obj.get("usage"), dict):
            out_t = max(out_t, _int(obj["usage"].get("output_tokens")))
        if "input_tokens" in obj and obj.get("type") is None:  # count_tokens
            in_t = _int(obj.get("input_tokens"))
    return Answer(in_t, out_t, model, tuple(tools))


def _chat_answer(objects: list[dict[str, Any]]) -> Answer:
    in_t = out_t = 0
    model = ""
    tools: dict[int, ToolUse] = {}
    for obj in objects:
        usage = obj.get("usage")
        if isinstance(usage, dict):
            in_t = max(in_t, _int(usage.get("prompt_tokens")))
            out_t = max(out_t, _int(usage.get("completion_tokens")))
        model = str(obj.get("model") or model)
        for choice in obj.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            part = choice.get("message") or choice.get("delta") or {}
            for index, call in enumerate(part.get("tool_calls") or []):
                if not isinstance(call, dict):
                    continue
                slot = _int(call.get("index", index))
                name = str((call.get("function") or {}).get("name") or "")
                if name or slot not in tools:
                    known = tools.get(slot)
                    ident = str(call.get("id") or (known.id if known else ""))
                    tools[slot] = ToolUse(ident, name or (known.name if known else ""))
    return Answer(in_t, out_t, model, tuple(tools[k] for k in sorted(tools)))


def _responses_answer(objects: list[dict[str, Any]]) -> Answer:
    in_t = out_t = 0
    model = ""
    tools: dict[str, ToolUse] = {}
    for obj in objects:
        response = obj.get("response") if isinstance(obj.get("response"), dict) else obj
        assert isinstance(response, dict)
        usage = response.get("usage")
        if isinstance(usage, dict):
            in_t = max(in_t, _int(usage.get("input_tokens")))
            out_t = max(out_t, _int(usage.get("output_tokens")))
        model = str(response.get("model") or model)
        items = list(response.get("output") or [])
        if isinstance(obj.get("item"), dict):
            items.append(obj["item"])
        for item in items:
            if isinstance(item, dict) and item.get("type") in (
                "function_call",
                "custom_tool_call",
                "local_shell_call",
            ):
                ident = str(item.get("call_id") or item.get("id") or "")
                name = str(item.get("name") or item.get("type"))
                tools[ident] = ToolUse(ident, name)
    return Answer(in_t, out_t, model, tuple(tools.values()))


# ----------------------------------------------------------------- what the agent did


def tool_pairs(api: Api, items: list[Any]) -> list[dict[str, Any]]:
    """Every completed tool call in a conversation: ``{id, name, input, output, error}``.

    A call is the model's ``tool_use`` (``tool_calls``, ``function_call``) paired with the
    CLI's ``tool_result`` (``tool`` message, ``function_call_output``) that answers it.
    """
    calls: dict[str, dict[str, Any]] = {}
    done: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        for call in _calls_in(api, item):
            calls.setdefault(call["id"], call)
        for ident, output, error in _results_in(api, item):
            if ident in calls and ident not in done:
                calls[ident].update(output=output, error=error)
                done.append(ident)
    return [calls[i] for i in done]


def _calls_in(api: Api, item: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    if api == "anthropic" and isinstance(item.get("content"), list):
        for block in item["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found.append(
                    {
                        "id": str(block.get("id")),
                        "name": str(block.get("name")),
                        "input": block.get("input"),
                    }
                )
    elif api == "openai-chat":
        for call in item.get("tool_calls") or []:
            if isinstance(call, dict):
                function = call.get("function") or {}
                found.append(
                    {
                        "id": str(call.get("id")),
                        "name": str(function.get("name")),
                        "input": function.get("arguments"),
                    }
                )
    elif api == "openai-responses" and item.get("type") in ("function_call", "custom_tool_call"):
        found.append(
            {
                "id": str(item.get("call_id")),
                "name": str(item.get("name")),
                "input": item.get("arguments", item.get("input")),
            }
        )
    return found


def _results_in(api: Api, item: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    found = []
    if api == "anthropic" and isinstance(item.get("content"), list):
        for block in item["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found.append(
                    (
                        str(block.get("tool_use_id")),
                        block.get("content"),
                        bool(block.get("is_error")),
                    )
                )
    elif api == "openai-chat" and item.get("role") == "tool":
        found.append((str(item.get("tool_call_id")), item.get("content"), False))
    elif api == "openai-responses" and item.get("type") in (
        "function_call_output",
        "custom_tool_call_output",
    ):
        found.append((str(item.get("call_id")), item.get("output"), False))
    return found


def preview(value: Any, limit: int = 200) -> str:
    """A short one-line rendering of a tool's input or output for views."""
    if isinstance(value, list):  # content blocks
        value = " ".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in value)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------ steering, errors


def with_steering(api: Api, items: list[Any], text: str) -> list[Any]:
    """The conversation with ``text`` added as a user message at its end."""
    items = list(items)  # a shallow copy: the last user message is replaced, not changed
    if api == "anthropic":
        last = items[-1] if items else None
        if isinstance(last, dict) and last.get("role") == "user":
            content = last.get("content")
            blocks = (
                [{"type": "text", "text": content}]
                if isinstance(content, str)
                else list(content or [])
            )
            items[-1] = {**last, "content": [*blocks, {"type": "text", "text": text}]}
            return items
        return [*items, {"role": "user", "content": [{"type": "text", "text": text}]}]
    if api == "openai-chat":
        return [*items, {"role": "user", "content": text}]
    return [
        *items,
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
    ]


def error_body(api: Api, kind: str, message: str) -> dict[str, Any]:
    """An error response body in ``api``'s own shape (``kind`` e.g. ``permission_error``)."""
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"type": kind, "code": kind, "message": message, "param": None}}
