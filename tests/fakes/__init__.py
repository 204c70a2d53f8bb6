"""Test fakes other areas reuse: model API servers on loopback that answer from a script.

- ``FakeOpenAIServer`` (``tests/fakes/openai_server.py``): OpenAI-compatible chat completions.
- ``FakeAnthropicServer`` (``tests/fakes/anthropic_server.py``): the Messages API.

Both are real HTTP servers on 127.0.0.1 in a thread, with request counters, injected
429/5xx answers with ``retry-after``, and ``hold``/``release`` to keep a call in flight.
"""

from __future__ import annotations

from tests.fakes._base import FakeModelServer
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer

__all__ = ["FakeAnthropicServer", "FakeModelServer", "FakeOpenAIServer"]
