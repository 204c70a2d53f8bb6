"""A fake Anthropic Messages API server for tests.

    from tests.fakes import FakeAnthropicServer

    with FakeAnthropicServer(responses) as server:
        model = build_model({"adapter": "anthropic", "model": "m",
                             "base_url": server.base_url}, base_dir=tmp_path)

Serves ``POST /v1/messages`` on 127.0.0.1 (random port) from a thread; ``base_url`` is the
server root (the adapter appends ``/v1/messages``). ``responses`` use the scripted-model
shape and are rendered as ``text`` and ``tool_use`` content blocks with ``stop_reason`` and
``usage`` by the scripted upstream's renderer (``assay.demo.upstream_wire``: tool-use ids
``toolu_fake<turn:04><index:02>``). The answer is chosen by the number of
``assistant`` turns in the request. Counters, injected failures and ``hold``/``release``
are those of ``FakeModelServer``; ``requests`` keeps the Messages-API bodies, so tests can
check the translation (``system`` field, ``tool_result`` blocks, alternating roles).
"""

from __future__ import annotations

from typing import Any

from assay.demo.upstream_wire import anthropic_message
from tests.fakes._base import FakeModelServer


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
        return anthropic_message(response, turn, self.model)
