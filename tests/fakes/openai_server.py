"""A fake OpenAI-compatible chat-completions server for tests and benchmarks.

    from tests.fakes import FakeOpenAIServer

    with FakeOpenAIServer(responses, fail_first=1, retry_after="1") as server:
        model = build_model({"adapter": "openai", "model": "m",
                             "base_url": server.base_url}, base_dir=tmp_path)
        ...
        assert server.count == 3          # completions answered
        assert server.failures_sent == 1  # injected 429s

``responses`` use the scripted-model shape (``content``, ``tool_calls: [{name,
arguments}]``, ``usage: {in_tokens, out_tokens}``); ``FakeOpenAIServer.from_script(path)``
reads a scripted-model YAML file. It is a real ``ThreadingHTTPServer`` on 127.0.0.1 (a
random port), serving ``POST /v1/chat/completions``; by default the answer is chosen by the
number of assistant messages in the request, so a resumed conversation gets the same
answer. See ``FakeModelServer`` for counters, injected failures, and ``hold``/``release``.

Run it as a process (for tests that drive desks in other processes):
``python -m tests.fakes openai SCRIPT.yaml`` (see ``tests/fakes/__main__.py``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes._base import FakeModelServer, usage_of


class FakeOpenAIServer(FakeModelServer):
    """``POST /v1/chat/completions`` answered from a script (see the module docstring)."""

    path = "/v1/chat/completions"

    @property
    def base_url(self) -> str:
        """The ``base_url`` an ``openai`` model config needs (``http://127.0.0.1:P/v1``)."""
        return f"{self.url}/v1"

    def assistant_turns(self, body: dict[str, Any]) -> int:
        messages = body.get("messages") or []
        return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")

    def render(self, response: dict[str, Any], turn: int) -> dict[str, Any]:
        calls = [
            {
                "id": f"call_{turn}_{index}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(call.get("arguments") or {}, sort_keys=True),
                },
            }
            for index, call in enumerate(response.get("tool_calls") or [])
        ]
        message: dict[str, Any] = {"role": "assistant", "content": response.get("content")}
        if calls:
            message["tool_calls"] = calls
        in_tokens, out_tokens = usage_of(response)
        return {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": in_tokens,
                "completion_tokens": out_tokens,
                "total_tokens": in_tokens + out_tokens,
            },
        }
