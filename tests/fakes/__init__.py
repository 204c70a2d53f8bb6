"""Test fakes other areas reuse: model API servers on loopback that answer from a script.

- ``FakeOpenAIServer`` (``tests/fakes/openai_server.py``): OpenAI-compatible chat completions.
- ``FakeAnthropicServer`` (``tests/fakes/anthropic_server.py``): the Messages API.
- ``WireFake`` (``tests/fakes/wire.py``): one server speaking Anthropic Messages, OpenAI Chat
  Completions and OpenAI Responses, streamed and not, from a script of turns; it tells side
  requests from turns, for driving real agent CLIs (docs/agent-cli-profiles.md).

The first two are real HTTP servers on 127.0.0.1 in a thread, with request counters, injected
429/5xx answers with ``retry-after``, and ``hold``/``release`` to keep a call in flight.
"""

from __future__ import annotations

from tests.fakes._base import FakeModelServer
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.wire import WireFake

__all__ = ["FakeAnthropicServer", "FakeModelServer", "FakeOpenAIServer", "WireFake"]
