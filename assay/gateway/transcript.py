"""What a model said in one wire response: its text and the tool calls it asked for.

``assay.gateway.wire.read_answer`` reads what the gateway needs to account and to refuse
(usage, tool names); a run you can watch needs the words and the arguments too, from the
same bytes the journal recorded (a streamed answer's events exactly as sent). Each API's
stream is put back together here: Anthropic's content blocks and their deltas, the chat
API's deltas by choice and tool-call index, and the Responses API's output items (the
final ``response.completed`` object when the stream has one).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from assay.gateway.wire import sse_events


@dataclass(frozen=True)
class Said:
    """A model answer as a person reads it: text, and each tool call with its arguments."""

    text: str = ""
    calls: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # {name, arguments}

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "tool_calls": [dict(call) for call in self.calls]}


def read_said(api: str, body: bytes, *, stream: bool) -> Said | None:
    """The text and tool calls of a response body of ``api``, or None when it is none."""
    try:
        objects = _objects(body) if stream else [json.loads(body)]
    except (ValueError, UnicodeDecodeError):
        return None
    objects = [o for o in objects if isinstance(o, dict)]
    if not objects:
        return None
    if api == "anthropic":
        return _anthropic(objects)
    if api == "openai-chat":
        return _chat(objects)
    if api == "openai-responses":
        return _responses(objects)
    return None


def said_of_message(message: Any) -> Said:
    """A desk's own model step (``run.model``): the OpenAI-style message it recorded."""
    if not isinstance(message, dict):
        return Said(text=_text(message))
    calls = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function") or {}
            calls.append(_call(function.get("name"), function.get("arguments")))
    return Said(text=_text(message.get("content")), calls=tuple(calls))


def _objects(raw: bytes) -> list[Any]:
    found = []
    for _, data in sse_events(raw):
        if data and data != "[DONE]":
            try:
                found.append(json.loads(data))
            except ValueError:
                continue
    return found


def _text(value: Any) -> str:
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


def _call(name: Any, arguments: Any) -> dict[str, Any]:
    """A tool call, its arguments parsed when they are a JSON string."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    return {"name": str(name or ""), "arguments": arguments}


def _anthropic(objects: list[dict[str, Any]]) -> Said:
    blocks: dict[int, dict[str, Any]] = {}
    for obj in objects:
        kind = obj.get("type")
        if kind == "message" or (kind is None and "content" in obj):
            for index, block in enumerate(obj.get("content") or []):
                if isinstance(block, dict):
                    blocks[index] = dict(block)
        elif kind == "content_block_start" and isinstance(obj.get("content_block"), dict):
            block = dict(obj["content_block"])
            if block.get("type") in ("tool_use", "server_tool_use"):
                block["partial"] = ""
            blocks[int(obj.get("index", len(blocks)))] = block
        elif kind == "content_block_delta" and isinstance(obj.get("delta"), dict):
            delta = obj["delta"]
            block = blocks.setdefault(int(obj.get("index", 0)), {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                block["partial"] = str(block.get("partial", "")) + str(
                    delta.get("partial_json", "")
                )
    text, calls = [], []
    for index in sorted(blocks):
        block = blocks[index]
        if block.get("type") == "text":
            text.append(str(block.get("text", "")))
        elif block.get("type") in ("tool_use", "server_tool_use"):
            partial = block.get("partial")
            arguments = partial if partial else block.get("input")
            calls.append(_call(block.get("name"), arguments))
    return Said(text="".join(text), calls=tuple(calls))


def _chat(objects: list[dict[str, Any]]) -> Said:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for obj in objects:
        choices = obj.get("choices") or []
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        part = choice.get("message") or choice.get("delta") or {}
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("content"), str):
            text.append(part["content"])
        for index, call in enumerate(part.get("tool_calls") or []):
            if not isinstance(call, dict):
                continue
            slot = call.get("index", index)
            slot = slot if isinstance(slot, int) else index
            function = call.get("function") or {}
            known = calls.setdefault(slot, {"name": "", "arguments": ""})
            known["name"] = known["name"] or str(function.get("name") or "")
            known["arguments"] += str(function.get("arguments") or "")
    found = tuple(_call(calls[k]["name"], calls[k]["arguments"]) for k in sorted(calls))
    return Said(text="".join(text), calls=found)


def _responses(objects: list[dict[str, Any]]) -> Said:
    items: list[Any] = []
    final = [o["response"] for o in objects if isinstance(o.get("response"), dict)]
    completed = [r for r in final if r.get("output")]
    if completed:
        items = list(completed[-1]["output"])
    elif "output" in objects[0]:
        items = list(objects[0]["output"] or [])
    else:
        items = [o["item"] for o in objects if o.get("type") == "response.output_item.done"]
    text, calls = [], []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "text"):
                    text.append(str(part.get("text", "")))
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(_call(item.get("name"), item.get("arguments", item.get("input"))))
        elif kind == "local_shell_call":
            calls.append(_call("local_shell", item.get("action")))
    return Said(text="".join(text), calls=tuple(calls))
