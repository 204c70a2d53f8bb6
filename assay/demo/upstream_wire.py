"""The wire shapes of the scripted upstream (``assay/demo/upstream.py``): one scripted turn
rendered as an Anthropic Messages reply, an OpenAI Chat Completions reply, an OpenAI
Responses reply or a Gemini ``GenerateContentResponse``, whole (JSON) or as the server-sent
events the real APIs stream.

A scripted turn is the scripted-model shape the other fakes use::

    {"content": "text or null",
     "tool_calls": [{"name": "Write", "arguments": {"file_path": "a.txt", "content": "x"}},
                    {"name": "apply_patch", "input": "*** Begin Patch ..."},  # freeform
                    {"namespace": "mcp__assay", "name": "note", "arguments": {}}],  # Responses
     "usage": {"in_tokens": 100, "out_tokens": 20}}

Ids and timestamps depend only on the turn number, so the same turn renders to the same
bytes every time (a test can compare a replayed stream with the original).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

Event = tuple[str | None, Any]  # (SSE event name or None, data: a JSON value or a raw str)

CREATED = 1_760_000_000  # a fixed epoch: timestamps are part of what must not change


def usage(turn: dict[str, Any]) -> tuple[int, int]:
    got = turn.get("usage") or {}
    return int(got.get("in_tokens", 100)), int(got.get("out_tokens", 20))


def arguments_json(call: dict[str, Any]) -> str:
    args = call.get("arguments")
    if isinstance(args, str):
        return args
    return json.dumps(args or {}, sort_keys=True)


def pieces(text: str, size: int = 12) -> list[str]:
    """Split text into stream deltas (at least one, so an empty string still streams)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# -- Anthropic Messages ---------------------------------------------------------------------


def anthropic_message(turn: dict[str, Any], number: int, model: str) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if turn.get("content"):
        blocks.append({"type": "text", "text": turn["content"]})
    for index, call in enumerate(turn.get("tool_calls") or []):
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_fake{number:04d}{index:02d}",
                "name": call["name"],
                "input": json.loads(arguments_json(call)),
            }
        )
    in_tokens, out_tokens = usage(turn)
    return {
        "id": f"msg_fake{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use" if turn.get("tool_calls") else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": in_tokens,
            "output_tokens": out_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_events(message: dict[str, Any]) -> Iterator[Event]:
    """``message_start``, per block ``content_block_start``/``_delta``/``_stop``,
    ``message_delta`` (stop reason, output tokens), ``message_stop``."""
    start = dict(message, content=[], stop_reason=None)
    start["usage"] = dict(message["usage"], output_tokens=1)
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"], sort_keys=True)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(raw)]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opened},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# -- OpenAI Chat Completions ----------------------------------------------------------------


def chat_completion(turn: dict[str, Any], number: int, model: str) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_fake{number:04d}{index:02d}",
            "type": "function",
            "function": {"name": call["name"], "arguments": arguments_json(call)},
        }
        for index, call in enumerate(turn.get("tool_calls") or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": turn.get("content")}
    if calls:
        message["tool_calls"] = calls
    in_tokens, out_tokens = usage(turn)
    return {
        "id": f"chatcmpl-fake{number:04d}",
        "object": "chat.completion",
        "created": CREATED + number,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": in_tokens,
            "completion_tokens": out_tokens,
            "total_tokens": in_tokens + out_tokens,
        },
    }


def chat_events(completion: dict[str, Any], *, include_usage: bool) -> Iterator[Event]:
    """``chat.completion.chunk`` objects: the role, content deltas, one tool call per
    index (name first, arguments in pieces), the finish reason, usage if asked, ``[DONE]``."""
    head = {k: completion[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        extra = {"usage": None} if include_usage else {}
        return None, {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }

    yield chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        for piece in pieces(message["content"]):
            yield chunk({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": function["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in pieces(function["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, choice["finish_reason"])
    if include_usage:
        yield None, {**head, "choices": [], "usage": completion["usage"]}
    yield None, "[DONE]"


# -- OpenAI Responses -----------------------------------------------------------------------


def responses_items(turn: dict[str, Any], number: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.get("content"):
        items.append(
            {
                "id": f"msg_fake{number:04d}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn["content"], "annotations": []}],
            }
        )
    for index, call in enumerate(turn.get("tool_calls") or []):
        ids = {
            "id": f"fc_fake{number:04d}{index:02d}",
            "call_id": f"call_fake{number:04d}{index:02d}",
        }
        if isinstance(call.get("input"), str):  # a freeform (custom) tool such as apply_patch
            items.append(
                {
                    "type": "custom_tool_call",
                    **ids,
                    "id": f"ctc_fake{number:04d}{index:02d}",
                    "name": call["name"],
                    "input": call["input"],
                    "status": "completed",
                }
            )
        else:
            item = {
                "type": "function_call",
                **ids,
                "name": call["name"],
                "arguments": arguments_json(call),
                "status": "completed",
            }
            if call.get("namespace"):  # a tool offered inside a namespace (Codex's MCP tools)
                item["namespace"] = call["namespace"]
            items.append(item)
    return items


def responses_object(turn: dict[str, Any], number: int, model: str) -> dict[str, Any]:
    in_tokens, out_tokens = usage(turn)
    return {
        "id": f"resp_fake{number:04d}",
        "object": "response",
        "created_at": CREATED + number,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": responses_items(turn, number),
        "parallel_tool_calls": True,
        "usage": {
            "input_tokens": in_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": in_tokens + out_tokens,
        },
    }


def responses_events(response: dict[str, Any]) -> Iterator[Event]:
    """``response.created``, ``response.in_progress``, per output item ``output_item.added``,
    its deltas and ``.done`` events, ``output_item.done``, then ``response.completed``; every
    event carries its ``sequence_number``."""
    pending = dict(response, status="in_progress", output=[], usage=None)
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": pending}),
        ("response.in_progress", {"response": pending}),
    ]
    for index, item in enumerate(response["output"]):
        events.extend(_item_events(index, item))
    events.append(("response.completed", {"response": response}))
    for sequence, (name, data) in enumerate(events):
        yield name, {"type": name, "sequence_number": sequence, **data}


def _item_events(index: int, item: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    at = {"output_index": index}
    if item["type"] == "message":
        yield (
            "response.output_item.added",
            {**at, "item": dict(item, status="in_progress", content=[])},
        )
        part = {"item_id": item["id"], **at, "content_index": 0}
        text = item["content"][0]["text"]
        yield (
            "response.content_part.added",
            {**part, "part": {"type": "output_text", "text": "", "annotations": []}},
        )
        for piece in pieces(text):
            yield "response.output_text.delta", {**part, "delta": piece}
        yield "response.output_text.done", {**part, "text": text}
        yield "response.content_part.done", {**part, "part": item["content"][0]}
    else:
        # A function call streams its ``arguments``, a custom tool call its ``input``.
        if item["type"] == "function_call":
            name, event = "arguments", "response.function_call_arguments"
        else:
            name, event = "input", "response.custom_tool_call_input"
        yield (
            "response.output_item.added",
            {**at, "item": dict(item, status="in_progress", **{name: ""})},
        )
        for piece in pieces(item[name]):
            yield f"{event}.delta", {"item_id": item["id"], **at, "delta": piece}
        yield f"{event}.done", {"item_id": item["id"], **at, name: item[name]}
    yield "response.output_item.done", {**at, "item": item}


# -- Gemini ---------------------------------------------------------------------------------


def gemini_response(turn: dict[str, Any], number: int, model: str) -> dict[str, Any]:
    """A ``GenerateContentResponse``. Its function calls carry no id, as the Gemini API's
    seldom do: the CLI makes its own up (from its clock), which a resume must survive."""
    parts: list[dict[str, Any]] = []
    if turn.get("content"):
        parts.append({"text": turn["content"]})
    for call in turn.get("tool_calls") or []:
        parts.append(
            {"functionCall": {"name": call["name"], "args": json.loads(arguments_json(call))}}
        )
    in_tokens, out_tokens = usage(turn)
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": in_tokens,
            "candidatesTokenCount": out_tokens,
            "totalTokenCount": in_tokens + out_tokens,
        },
        "modelVersion": model,
        "responseId": f"resp_fake{number:04d}",
    }


def gemini_events(response: dict[str, Any]) -> Iterator[Event]:
    """The text in chunks of its own, then one chunk with the function calls, the finish
    reason and the usage (``streamGenerateContent?alt=sse``: ``data:`` lines, no names)."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"]
    head = {"modelVersion": response["modelVersion"], "responseId": response["responseId"]}
    for part in parts:
        if "text" in part:
            for piece in pieces(part["text"]):
                content = {"role": "model", "parts": [{"text": piece}]}
                yield None, {"candidates": [{"content": content, "index": 0}], **head}
    calls = [part for part in parts if "functionCall" in part]
    last = {"content": {"role": "model", "parts": calls}, "finishReason": "STOP", "index": 0}
    yield None, {"candidates": [last], "usageMetadata": response["usageMetadata"], **head}


def sse(event: Event) -> bytes:
    """One server-sent event: ``event:`` (when named) and ``data:`` lines, a blank line."""
    name, data = event
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {payload}\n\n".encode()
