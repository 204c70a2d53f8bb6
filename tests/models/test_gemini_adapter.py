"""The gemini adapter (an agent desk's model on Google's Gemini API) against the scripted
upstream on 127.0.0.1, which speaks the Gemini API: translation both ways, the model in
the path, the key in its header, usage and cost; the error mapping is ``HttpAdapter``'s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.errors import Denied
from assay.models import build_model
from assay.models.gemini import from_gemini, to_gemini
from tests.fakes.wire import WireFake

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
SCRIPT: list[dict[str, Any]] = [
    {
        "content": "Writing it.",
        "tool_calls": [{"name": "write_file", "arguments": {"path": "a.py", "content": "x"}}],
        "usage": {"in_tokens": 1000, "out_tokens": 500},
    },
    {"content": "All done."},
]


def gemini(fake: WireFake, tmp_path: Path, **extra: Any) -> Any:
    config = {
        "adapter": "gemini",
        "model": "gemini-test",
        "base_url": fake.url,
        "api_key_env": "TEST_GEMINI_KEY",
        "backoff_s": 0.01,
        "attempts": 2,
        "price": {"in_per_1k": 0.01, "out_per_1k": 0.03},
        **extra,
    }
    return build_model(config, base_dir=tmp_path)


def test_a_tool_call_round_trip_with_usage_cost_the_model_in_the_path_and_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_GEMINI_KEY", "gk-test-123")
    with WireFake(SCRIPT) as fake:
        model = gemini(fake, tmp_path)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You write code."},
            {"role": "user", "content": "Add a.py"},
        ]
        first = model.complete(messages, tools=TOOLS)
        assert first.message["content"] == "Writing it." and first.stop == "tool_calls"
        (call,) = first.tool_calls
        assert call["function"]["name"] == "write_file"
        assert json.loads(call["function"]["arguments"]) == {"path": "a.py", "content": "x"}
        assert (first.usage.in_tokens, first.usage.out_tokens) == (1000, 500)
        assert first.usage.usd == pytest.approx(0.01 + 0.015)
        messages += [first.message, {"role": "tool", "tool_call_id": call["id"], "content": "ok"}]
        second = model.complete(messages, tools=TOOLS)
        assert second.message == {"role": "assistant", "content": "All done."}
        assert second.stop == "stop"
        sent = fake.turn_requests()
    assert [s.path for s in sent] == ["/v1beta/models/gemini-test:generateContent"] * 2
    assert sent[0].headers["x-goog-api-key"] == "gk-test-123"
    assert "authorization" not in sent[0].headers
    body = sent[1].body
    assert body["systemInstruction"] == {"parts": [{"text": "You write code."}]}
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    response = body["contents"][2]["parts"][0]["functionResponse"]
    assert response == {"name": "write_file", "response": {"output": "ok"}}
    declared = body["tools"][0]["functionDeclarations"][0]
    assert declared["name"] == "write_file" and declared["parametersJsonSchema"]["type"] == "object"


def test_a_refused_key_is_denied_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_GEMINI_KEY", "gk-wrong")
    with WireFake(SCRIPT) as fake:
        fake.inject(403)
        with pytest.raises(Denied, match=r"TEST_GEMINI_KEY"):
            gemini(fake, tmp_path).complete([{"role": "user", "content": "hi"}], tools=TOOLS)


def test_translation_merges_turns_and_names_each_result_from_its_call() -> None:
    messages = [
        {"role": "system", "content": "a"},
        {"role": "system", "content": "b"},
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "function": {"name": "read", "arguments": '{"p": 1}'}},
                {"id": "c2", "function": {"name": "run", "arguments": "not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": {"exit": 0}},
        {"role": "tool", "tool_call_id": "c1", "content": "text"},
    ]
    system, contents, tools = to_gemini(messages, None)
    assert system == "a\n\nb" and tools == []
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    calls = [p["functionCall"] for p in contents[1]["parts"]]
    assert calls == [
        {"name": "read", "args": {"p": 1}},
        {"name": "run", "args": {"arguments": "not json"}},
    ]
    results = [p["functionResponse"]["name"] for p in contents[2]["parts"]]
    assert results == ["run", "read"]  # one user turn, each result named from its call
    thought = {
        "candidates": [{"content": {"parts": [{"text": "hm", "thought": True}, {"text": "x"}]}}]
    }
    assert from_gemini(thought) == ({"role": "assistant", "content": "x"}, "stop")
