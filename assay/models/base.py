"""The interface every model adapter implements, and the shapes it exchanges.

Messages use the OpenAI chat shape everywhere inside Assay (``role``, ``content``,
``tool_calls``, ``tool_call_id``); adapters for other APIs translate at their boundary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, Any]
ToolSpec = dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """What one call cost: tokens each way and dollars (0 when the price is unknown)."""

    in_tokens: int = 0
    out_tokens: int = 0
    usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"in_tokens": self.in_tokens, "out_tokens": self.out_tokens, "usd": self.usd}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        """The inverse of ``to_json`` (missing fields are 0)."""
        return cls(
            in_tokens=int(data.get("in_tokens", 0)),
            out_tokens=int(data.get("out_tokens", 0)),
            usd=float(data.get("usd", 0.0)),
        )


@dataclass(frozen=True)
class ModelReply:
    """The assistant message a model returned, and what it cost.

    ``stop`` is the reason the model stopped, normalised: ``tool_calls``, ``stop`` (a final
    answer), ``length`` (cut off by max tokens), or ``""`` when the API did not say. It is
    informational: a replayed model step restores the message, usage and model only, so
    desk code decides on ``message["tool_calls"]``, never on ``stop``.
    """

    message: Message
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop: str = ""

    def to_json(self) -> dict[str, Any]:
        payload = {"message": self.message, "usage": self.usage.to_json(), "model": self.model}
        if self.stop:
            payload["stop"] = self.stop
        return payload

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelReply:
        """Rebuild a reply from ``to_json`` output (a journal's recorded model step)."""
        return cls(
            message=dict(data["message"]),
            usage=Usage.from_json(data.get("usage") or {}),
            model=str(data.get("model", "")),
            stop=str(data.get("stop", "")),
        )

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The message's tool calls (OpenAI shape), ``[]`` for a final answer."""
        calls = self.message.get("tool_calls") or []
        return list(calls)


def estimate_tokens(messages: list[Message]) -> int:
    """A cheap token estimate (about 4 characters a token) for context-window decisions."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif content is not None:
            total += len(json.dumps(content, default=str))
        for call in message.get("tool_calls") or []:
            total += len(json.dumps(call, default=str))
    return total // 4 + 4 * len(messages)


class ModelAdapter(Protocol):
    """One chat-completions call with optional tool calling."""

    name: str
    context_window: int

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        """Return the model's next message; raise ``Unavailable`` after retries."""
        ...
