"""The Anthropic Messages API (``/v1/messages``, ``/v1/messages/count_tokens``): Claude Code."""

from __future__ import annotations

import re
from typing import Any

from assay.gateway.apis.base import (
    Answer,
    RoutePattern,
    Said,
    ToolUse,
    WireApi,
    as_int,
    call_of,
    steady,
)
from assay.gateway.volatile import Mask

# Claude Code puts a per-request attribution/billing line in its system prompt (a hash
# of the request); it is the one part of an otherwise stable system prompt that changes.
_BILLING = re.compile(r"x-anthropic-billing-header:[^\n]*\n?")
# Claude Code snapshots `git status` and the recent commits into its system prompt; a
# resumed CLI sees the desk's own durability commits there, so the snapshot is volatile.
_GIT_STATUS = re.compile(r"gitStatus: .*", re.DOTALL)
TOOL_USES = ("tool_use", "server_tool_use")


def _system_text(text: str) -> str:
    return _GIT_STATUS.sub("gitStatus: (volatile)", _BILLING.sub("", text))


class AnthropicApi(WireApi):
    name = "anthropic"
    title = "the Anthropic Messages API"
    adapter = "anthropic"
    routes = (
        RoutePattern(re.compile(r"/v1/messages")),
        RoutePattern(re.compile(r"/v1/messages/count_tokens"), counts_tokens=True),
    )
    overload_status = 529  # Anthropic's "overloaded"

    def normalise_rest(self, body: dict[str, Any]) -> dict[str, Any]:
        """Claude Code's billing line and its ``gitStatus`` snapshot out of ``system``."""
        system = body.get("system")
        if isinstance(system, str):
            body["system"] = _system_text(system)
        elif isinstance(system, list):
            kept = []
            for block in system:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    text = _system_text(block["text"])
                    if not text.strip():
                        continue
                    block = {**block, "text": text}
                kept.append(block)
            body["system"] = kept
        return body

    def steady_results(self, item: Any, found: tuple[Mask, ...]) -> Any:
        if not isinstance(item, dict) or not isinstance(item.get("content"), list):
            return item
        blocks = [
            {**block, "content": steady(block.get("content"), found)}
            if isinstance(block, dict) and block.get("type") == "tool_result"
            else block
            for block in item["content"]
        ]
        return {**item, "content": blocks}

    def with_steering(self, items: list[Any], text: str) -> list[Any]:
        items = list(items)  # a shallow copy: the last user message is replaced, not changed
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

    def read_answer(self, objects: list[dict[str, Any]]) -> Answer:
        in_t = out_t = 0
        model = ""
        tools: list[ToolUse] = []
        for obj in objects:
            message = obj.get("message") if obj.get("type") == "message_start" else obj
            if isinstance(message, dict):
                usage = message.get("usage") or {}
                if isinstance(usage, dict):
                    in_t += sum(
                        as_int(usage.get(k))
                        for k in (
                            "input_tokens",
                            "cache_read_input_tokens",
                            "cache_creation_input_tokens",
                        )
                    )
                    out_t = max(out_t, as_int(usage.get("output_tokens")))
                model = str(message.get("model") or model)
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") in TOOL_USES:
                        tools.append(ToolUse(str(block.get("id", "")), str(block.get("name", ""))))
            block = obj.get("content_block")
            started = obj.get("type") == "content_block_start" and isinstance(block, dict)
            if started and isinstance(block, dict) and block.get("type") in TOOL_USES:
                tools.append(ToolUse(str(block.get("id", "")), str(block.get("name", ""))))
            if obj.get("type") == "message_delta" and isinstance(obj.get("usage"), dict):
                out_t = max(out_t, as_int(obj["usage"].get("output_tokens")))
            if "input_tokens" in obj and obj.get("type") is None:  # count_tokens
                in_t = as_int(obj.get("input_tokens"))
        return Answer(in_t, out_t, model, tuple(tools))

    def said(self, objects: list[dict[str, Any]]) -> Said:
        """Content blocks and their deltas put back together."""
        blocks: dict[int, dict[str, Any]] = {}
        for obj in objects:
            kind = obj.get("type")
            if kind == "message" or (kind is None and "content" in obj):
                for index, block in enumerate(obj.get("content") or []):
                    if isinstance(block, dict):
                        blocks[index] = dict(block)
            elif kind == "content_block_start" and isinstance(obj.get("content_block"), dict):
                block = dict(obj["content_block"])
                if block.get("type") in TOOL_USES:
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
            elif block.get("type") in TOOL_USES:
                partial = block.get("partial")
                arguments = partial if partial else block.get("input")
                calls.append(call_of(block.get("name"), arguments))
        return Said(text="".join(text), calls=tuple(calls))

    def calls_in(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "id": str(block.get("id")),
                "name": str(block.get("name")),
                "input": block.get("input"),
            }
            for block in _blocks(item)
            if block.get("type") == "tool_use"
        ]

    def results_in(self, item: dict[str, Any]) -> list[tuple[str, Any, bool]]:
        return [
            (str(block.get("tool_use_id")), block.get("content"), bool(block.get("is_error")))
            for block in _blocks(item)
            if block.get("type") == "tool_result"
        ]

    def error_body(self, kind: str, message: str, status: int) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind, "message": message}}


def _blocks(item: dict[str, Any]) -> list[dict[str, Any]]:
    content = item.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
