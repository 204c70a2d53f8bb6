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
answer. Completions are rendered by the scripted upstream's renderer
(``assay.demo.upstream_wire``: tool-call ids ``call_fake<turn:04><index:02>``). See
``FakeModelServer`` for counters, injected failures, and ``hold``/``release``.

Run it as a process (for tests that drive desks in other processes):
``python -m tests.fakes openai SCRIPT.yaml`` (see ``tests/fakes/__main__.py``).
"""

from __future__ import annotations

from typing import Any

from assay.demo.upstream_wire import chat_completion
from tests.fakes._base import FakeModelServer


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
        return chat_completion(response, turn, self.model)
