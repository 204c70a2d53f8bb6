"""The ``anthropic`` adapter: the Messages API, translated to and from the OpenAI shape.

Inside Assay every message has the OpenAI chat shape. This adapter turns ``system``
messages into the top-level ``system`` field, assistant ``tool_calls`` into ``tool_use``
blocks, ``tool`` messages into ``tool_result`` blocks of a user turn (merging consecutive
turns of one role, which the API requires), and the answer back.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from assay.errors import Unavailable
from assay.models.base import Message, ModelReply, ToolSpec, Usage
from assay.models.config import AnthropicConfig
from assay.models.http import HttpAdapter

DEFAULT_BASE_URL = "https://api.anthropic.com"
_STOPS = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
}


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):  # already OpenAI content parts
        return [
            {"type": "text", "text": str(part.get("text", ""))}
            for part in content
            if isinstance(part, dict) and part.get("text")
        ]
    return [{"type": "text", "text": str(content)}]


def to_anthropic(
    messages: list[Message], tools: list[ToolSpec] | None = None
) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(system text, Messages-API messages, Messages-API tools) for an OpenAI conversation."""
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "system":
            system_parts.extend(b["text"] for b in _text_blocks(message.get("content")))
        else:
            _add_turn(turns, *_turn(message))
    return "\n\n".join(system_parts), turns, _tool_specs(tools)


def _add_turn(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Append ``blocks`` as a ``role`` turn, merged into the last turn when it has that role
    (the API requires user and assistant turns to alternate)."""
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": list(blocks)})


def _turn(message: Message) -> tuple[str, list[dict[str, Any]]]:
    """The Messages-API role and content blocks of one non-system OpenAI message."""
    role = message.get("role")
    if role == "user":
        return "user", _text_blocks(message.get("content"))
    if role == "assistant":
        calls = message.get("tool_calls") or []
        return "assistant", _text_blocks(message.get("content")) + [_tool_use(c) for c in calls]
    if role == "tool":
        return "user", [_tool_result(message)]
    return "", []  # a role the Messages API has no place for carries nothing


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = {"raw": arguments}
    if not isinstance(parsed, dict):
        parsed = {"value": parsed}
    return {
        "type": "tool_use",
        "id": call.get("id", ""),
        "name": function.get("name", ""),
        "input": parsed,
    }


def _tool_result(message: Message) -> dict[str, Any]:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    return {"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""), "content": text}


def _tool_specs(tools: list[ToolSpec] | None) -> list[dict[str, Any]]:
    return [
        {
            "name": spec["function"]["name"],
            "description": spec["function"].get("description", ""),
            "input_schema": spec["function"].get("parameters", {"type": "object"}),
        }
        for spec in tools or []
    ]


def from_anthropic(data: dict[str, Any]) -> tuple[Message, str]:
    """The OpenAI-shaped assistant message and normalised stop reason of an answer."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in data["content"]:
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": str(block["id"]),
                    "type": "function",
                    "function": {
                        "name": str(block["name"]),
                        "arguments": json.dumps(block.get("input") or {}, sort_keys=True),
                    },
                }
            )
    message: Message = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    stop = _STOPS.get(str(data.get("stop_reason")), str(data.get("stop_reason") or ""))
    return message, stop


class AnthropicModel(HttpAdapter[AnthropicConfig]):
    """``ModelAdapter`` for the Anthropic Messages API."""

    name = "anthropic"

    def __init__(
        self, config: AnthropicConfig, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        super().__init__(config, base_url=config.base_url or DEFAULT_BASE_URL, transport=transport)

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        """One Messages call; ``Unavailable`` after retries, ``Denied`` on a bad key."""
        system, turns, specs = to_anthropic(messages, tools)
        payload: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": self.config.max_tokens or 4096,
            "messages": turns,
        }
        if system:
            payload["system"] = system
        if specs:
            payload["tools"] = specs
        if self.config.temperature is not None:
            payload["temperature"] = self.config.temperature
        headers = {
            "content-type": "application/json",
            "anthropic-version": self.config.anthropic_version,
        }
        key = self._api_key()
        if key:
            headers["x-api-key"] = key
        data = self._post("/v1/messages", payload, headers)
        try:
            message, stop = from_anthropic(data)
        except (KeyError, TypeError, AttributeError) as exc:
            raise Unavailable(f"model {self.config.model}: malformed answer ({exc!r})") from exc
        usage = data.get("usage") or {}
        in_tokens = (
            int(usage.get("input_tokens") or 0)
            + int(usage.get("cache_read_input_tokens") or 0)
            + int(usage.get("cache_creation_input_tokens") or 0)
        )
        out_tokens = int(usage.get("output_tokens") or 0)
        return ModelReply(
            message=message,
            usage=Usage(in_tokens, out_tokens, self.config.price.usd(in_tokens, out_tokens)),
            model=str(data.get("model") or self.config.model),
            stop=stop,
        )
