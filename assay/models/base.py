"""The interface every model adapter implements, and the shapes it exchanges.

Messages use the OpenAI chat shape everywhere inside Assay (``role``, ``content``,
``tool_calls``, ``tool_call_id``); adapters for other APIs translate at their boundary.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class ModelReply:
    """The assistant message a model returned, and what it cost."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "usage": self.usage.to_json(), "model": self.model}


class ModelAdapter(Protocol):
    """One chat-completions call with optional tool calling."""

    name: str
    context_window: int

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        """Return the model's next message; raise ``Unavailable`` after retries."""
        ...
