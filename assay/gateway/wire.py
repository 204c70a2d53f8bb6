"""The wire APIs agent CLIs speak, as far as the gateway needs to understand them: each
function here is the named API's method (``assay.gateway.apis``: one class per API, and the
registry), so the gateway's callers name an API and never branch on one.

APIs: ``anthropic`` (``/v1/messages``, ``/v1/messages/count_tokens``), ``openai-chat``
(``/v1/chat/completions``), ``openai-responses`` (``/v1/responses``), ``gemini``
(``/v1beta/models/{model}:generateContent``, ``:streamGenerateContent``, ``:countTokens``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from assay.gateway.apis import (
    API_NAMES,
    REGISTRY,
    Answer,
    ApiName,
    ItemTools,
    ToolUse,
    get_api,
    no_route,
    resolve,
)
from assay.gateway.volatile import RUNNER_TIMES, Mask
from assay.journal.format import canonical
from assay.runtime.wire import first_difference as first_difference  # re-exported

Api = ApiName
APIS: tuple[Api, ...] = API_NAMES
MARKERS: dict[str, tuple[str, ...]] = {name: api.markers for name, api in REGISTRY.items()}


def conversation_key(api: str) -> str:
    """The request field holding the conversation."""
    return get_api(api).conversation_key


def split(api: str, body: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``(conversation items, the rest of the body)``; a string ``input`` is one item."""
    return get_api(api).split(body)


def join(api: str, items: list[Any], rest: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``split``."""
    return get_api(api).join(items, rest)


def normalise(
    api: str,
    body: dict[str, Any],
    masks: tuple[Mask, ...] = (),
    *,
    steady: list[Any] | None = None,
) -> dict[str, Any]:
    """The request with what changes between two runs of the same CLI step removed.

    Dropped: the API's top-level identifying fields (``metadata`` carries Claude Code's
    per-session user id), the ``stream_options`` of a chat request, and what the API's own
    ``normalise_rest`` takes out (Claude Code's billing line and ``gitStatus`` snapshot, the
    Gemini CLI's minted call ids); masked, in tool results only (never in the instructions
    or in what the model said): the run times test runners print (``RUNNER_TIMES``) and
    every match of ``masks`` (the profile's and the desk's volatile output,
    ``assay.gateway.volatile``). Everything else must match exactly (a profile's
    ``normalise`` may drop more). ``steady``: the conversation's items with the masks
    applied, when the caller has them already (each the API's ``steady_results`` of the
    item, with ``matching_masks(masks)``).
    """
    return get_api(api).normalise(body, matching_masks(masks), steady=steady)


def matching_masks(masks: tuple[Mask, ...] = ()) -> tuple[Mask, ...]:
    """What ``normalise`` masks in tool results: ``RUNNER_TIMES`` and ``masks``."""
    return RUNNER_TIMES + tuple(masks)


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


def json_events(raw: bytes) -> list[Any]:
    """The JSON data of each event of an event stream (``[DONE]`` and bad JSON skipped)."""
    found = []
    for _, data in sse_events(raw):
        if data and data != "[DONE]":
            try:
                found.append(json.loads(data))
            except ValueError:
                continue
    return found


def response_objects(body: bytes, *, stream: bool) -> list[dict[str, Any]] | None:
    """The JSON objects of a response body (each event of a stream), or None when it has
    none or holds anything but objects."""
    try:
        objects = (
            [o for o in json_events(body) if isinstance(o, dict)] if stream else [json.loads(body)]
        )
    except (ValueError, UnicodeDecodeError):
        return None
    if not objects or not all(isinstance(o, dict) for o in objects):
        return None
    return objects


def read_answer(api: str, body: bytes, *, stream: bool) -> Answer | None:
    """Usage and tool calls of a 2xx response body, or None when it is not one of ``api``'s."""
    objects = response_objects(body, stream=stream)
    return None if objects is None else get_api(api).read_answer(objects)


# ----------------------------------------------------------------- what the agent did


def tool_pairs(
    api: str, items: list[Any], *, tools: list[ItemTools] | None = None
) -> list[dict[str, Any]]:
    """Every completed tool call in a conversation: ``{id, name, input, output, error}``
    (``tools``: each item's ``WireApi.item_tools``, when the caller has them already)."""
    return get_api(api).tool_pairs(items, tools=tools)


def preview(value: Any, limit: int = 200) -> str:
    """A short one-line rendering of a tool's input or output for views."""
    if isinstance(value, list):  # content blocks
        value = " ".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in value)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------ steering, errors


def with_steering(api: str, items: list[Any], text: str) -> list[Any]:
    """The conversation with ``text`` added as a user message at its end."""
    return get_api(api).with_steering(items, text)


def error_body(api: str, kind: str, message: str, status: int = 400) -> dict[str, Any]:
    """An error response body in ``api``'s own shape (``kind`` e.g. ``permission_error``)."""
    return get_api(api).error_body(kind, message, status)


__all__ = [
    "APIS",
    "Answer",
    "Api",
    "ToolUse",
    "conversation_key",
    "digest",
    "error_body",
    "first_difference",
    "join",
    "matching_masks",
    "no_route",
    "normalise",
    "preview",
    "read_answer",
    "resolve",
    "split",
    "tool_pairs",
    "with_steering",
]
