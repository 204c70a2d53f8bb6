"""A fake Anthropic Messages API server for tests.

    from tests.fakes import FakeAnthropicServer

    with FakeAnthropicServer(responses) as server:
        model = build_model({"adapter": "anthropic", "model": "m",
                             "base_url": server.base_url}, base_dir=tmp_path)

Serves ``POST /v1/messages`` on 127.0.0.1 (random port) from a thread; ``base_url`` is the
server root (the adapter appends ``/v1/messages``). ``responses`` use the scripted-model
shape and are rendered as ``text`` and ``tool_use`` content blocks with ``stop_reason`` and
``usage`` (``input_tokens``, ``output_tokens``). The answer is chosen by the number of
``assistant`` turns in the request. Counters, injected failures and ``hold``/``release``
are those of ``FakeModelServer``; ``requests`` keeps the Messages-API bodies, so tests can
check the translation (``system`` field, ``tool_result`` blocks, alternating roles).
"""

from __future__ import annotations

from typing import Any

from tests.fakes._base import FakeModelServer, usage_of


class FakeAnthropicServer(FakeModelServer):
    """``POST /v1/messages`` answered from a script (see the module docstring)."""

    path = "/v1/messages"

    @property
    def base_url(self) -> str:
        return self.url

    def assistant_turns(self, body: dict[str, Any]) -> int:
        messages = body.get("messages") or []
        return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")

    def render(self, response: dict[str, Any], turn: int) -> dict[str, Any]:
        blocks: list[dict[str, Any]] = []
        if response.get("content"):
            blocks.append({"type": "text", "text": response["content"]})
        for index, call in enumerate(response.get("tool_calls") or []):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{turn}_{index}",
                    "name": call["name"],
                    "input": call.get("arguments") or {},
                }
            )
        in_tokens, out_tokens = usage_of(response)
        return {
            "id": f"msg_{turn}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks,
            "stop_reason": "tool_use" if response.get("tool_calls") else "end_turn",
            "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens},
        }
