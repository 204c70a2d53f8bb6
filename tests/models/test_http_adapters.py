"""The openai and anthropic adapters against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.errors import BadInput, Denied, Unavailable
from assay.models import build_model
from assay.models.anthropic import from_anthropic, to_anthropic
from assay.models.http import parse_retry_after
from assay.models.openai import OpenAIModel
from tests.fakes import FakeAnthropicServer, FakeOpenAIServer

SCRIPT: list[dict[str, Any]] = [
    {
        "content": "Writing it.",
        "tool_calls": [{"name": "write_file", "arguments": {"path": "a.py", "content": "x"}}],
        "usage": {"in_tokens": 1000, "out_tokens": 500},
    },
    {"content": "All done."},
]
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


def openai(server: FakeOpenAIServer, tmp_path: Path, **extra: Any) -> Any:
    config = {
        "adapter": "openai",
        "model": "gpt-test",
        "base_url": server.base_url,
        "backoff_s": 0.01,
        "price": {"in_per_1k": 0.01, "out_per_1k": 0.03},
        **extra,
    }
    return build_model(config, base_dir=tmp_path)


def test_openai_tool_call_round_trip_with_usage_and_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", "sk-test-123")
    with FakeOpenAIServer(SCRIPT) as server:
        model = openai(server, tmp_path, api_key_env="TEST_MODEL_KEY")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You write code."},
            {"role": "user", "content": "Add a.py", "assay_turns": 0},
        ]
        reply = model.complete(messages, tools=TOOLS)
        assert reply.message["content"] == "Writing it."
        call = reply.tool_calls[0]
        assert call["function"]["name"] == "write_file"
        assert json.loads(call["function"]["arguments"]) == {"path": "a.py", "content": "x"}
        assert reply.usage.in_tokens == 1000 and reply.usage.out_tokens == 500
        assert reply.usage.usd == pytest.approx(0.01 + 0.015)
        assert reply.stop == "tool_calls" and reply.model == "fake-model"
        sent = server.requests[0]
        assert sent["model"] == "gpt-test" and sent["tools"] == TOOLS
        assert all("assay_turns" not in m for m in sent["messages"])  # Assay markers stripped
        assert server.headers[0]["authorization"] == "Bearer sk-test-123"
        follow = [
            *messages,
            reply.message,
            {"role": "tool", "tool_call_id": call["id"], "content": "{}"},
        ]
        final = model.complete(follow, tools=TOOLS)
        assert final.message == {"role": "assistant", "content": "All done."}
        assert final.stop == "stop"
        assert server.count == 2


def test_openai_base_url_defaults_to_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAIServer(SCRIPT) as server:
        monkeypatch.setenv("ASSAY_MODEL_BASE_URL", server.base_url)
        model = build_model({"adapter": "openai", "model": "m"}, base_dir=tmp_path)
        assert isinstance(model, OpenAIModel) and model.base_url == server.base_url
        model.complete([{"role": "user", "content": "hi"}])
        assert server.count == 1


def test_429_with_retry_after_is_honoured_then_answered(tmp_path: Path) -> None:
    with FakeOpenAIServer(SCRIPT, fail_first=2, retry_after="0.4") as server:
        model = openai(server, tmp_path)
        started = time.monotonic()
        reply = model.complete([{"role": "user", "content": "hi"}])
        elapsed = time.monotonic() - started
        assert reply.message["content"] == "Writing it."
        assert server.failures_sent == 2 and server.count == 1 and server.received == 3
        assert elapsed >= 0.8  # two waits of the server's retry-after, not the 0.01 s backoff


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_retried(tmp_path: Path, status: int) -> None:
    with FakeOpenAIServer(SCRIPT, fail_first=1, fail_status=status, retry_after=None) as server:
        openai(server, tmp_path).complete([{"role": "user", "content": "hi"}])
        assert server.received == 2 and server.count == 1


def test_persistent_429_ends_unavailable(tmp_path: Path) -> None:
    with FakeOpenAIServer(SCRIPT, fail_first=100, retry_after="0") as server:
        with pytest.raises(Unavailable) as caught:
            openai(server, tmp_path, attempts=3).complete([{"role": "user", "content": "hi"}])
        assert caught.value.code == 69
        assert "no capacity after 3 attempts (HTTP 429)" in caught.value.message
        assert caught.value.details == {"capacity": True, "http": 429}  # as the gateway says
        assert server.received == 3 and server.count == 0


def test_unreachable_endpoint_is_unavailable(tmp_path: Path) -> None:
    with FakeOpenAIServer(SCRIPT) as server:
        url = server.base_url
    model = build_model(
        {"adapter": "openai", "model": "m", "base_url": url, "attempts": 2, "backoff_s": 0},
        base_dir=tmp_path,
    )
    with pytest.raises(Unavailable, match="ConnectError"):
        model.complete([{"role": "user", "content": "hi"}])


def transport(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, bytes):
            return httpx.Response(status, content=body, headers=headers)
        return httpx.Response(status, json=body if body is not None else {}, headers=headers)

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    ("status", "body", "error", "text"),
    [
        (401, {"error": "bad key"}, Denied, "refused the credentials (HTTP 401); check $K"),
        (403, {}, Denied, "HTTP 403"),
        (400, {"error": "bad request"}, BadInput, "HTTP 400"),
        (200, b"not json", Unavailable, "not JSON"),
        (200, {"choices": []}, Unavailable, "malformed answer"),
        (200, [1, 2], Unavailable, "not a JSON object"),
    ],
)
def test_http_errors_map_to_the_error_tree(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    body: Any,
    error: type[Exception],
    text: str,
) -> None:
    monkeypatch.setenv("K", "sk-very-secret")
    model = build_model(
        {"adapter": "openai", "model": "m", "base_url": "http://127.0.0.1:9", "api_key_env": "K"},
        base_dir=tmp_path,
        transport=transport(status, body),
    )
    with pytest.raises(error) as caught:
        model.complete([{"role": "user", "content": "hi"}])
    assert text in str(caught.value)
    assert "sk-very-secret" not in str(caught.value)


def test_retry_after_forms() -> None:
    assert parse_retry_after(httpx.Headers({"retry-after": "2"})) == 2.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert parse_retry_after(httpx.Headers({})) is None
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    date = "Wed, 21 Oct 2015 07:28:10 GMT"
    assert parse_retry_after(httpx.Headers({"retry-after": date}), now=1445412480.0) == 10.0


def test_anthropic_round_trip_translates_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropicServer(SCRIPT, fail_first=1, retry_after="0") as server:
        model = build_model(
            {
                "adapter": "anthropic",
                "model": "claude-test",
                "base_url": server.base_url,
                "backoff_s": 0,
                "price": {"in_per_1k": 0.003, "out_per_1k": 0.015},
            },
            base_dir=tmp_path,
        )
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Add a.py"},
        ]
        reply = model.complete(messages, tools=TOOLS)
        assert reply.stop == "tool_calls"
        call = reply.tool_calls[0]
        assert call["id"] == "toolu_fake000000"
        assert json.loads(call["function"]["arguments"]) == {"path": "a.py", "content": "x"}
        assert reply.usage.usd == pytest.approx(0.003 + 0.0075)
        sent = server.requests[0]
        assert sent["system"] == "Be brief."
        assert sent["tools"][0]["input_schema"] == TOOLS[0]["function"]["parameters"]
        assert sent["max_tokens"] == 4096
        assert server.headers[0]["x-api-key"] == "sk-ant-test"
        assert server.headers[0]["anthropic-version"] == "2023-06-01"
        follow = [
            *messages,
            reply.message,
            {"role": "tool", "tool_call_id": call["id"], "content": "wrote 1 byte"},
            {"role": "user", "content": "and now?"},
        ]
        final = model.complete(follow, tools=TOOLS)
        assert final.message == {"role": "assistant", "content": "All done."}
        turns = server.requests[1]["messages"]
        assert [t["role"] for t in turns] == ["user", "assistant", "user"]
        assert turns[1]["content"][1] == {
            "type": "tool_use",
            "id": "toolu_fake000000",
            "name": "write_file",
            "input": {"content": "x", "path": "a.py"},
        }
        # The tool result and the next user text merge into one user turn.
        assert turns[2]["content"] == [
            {"type": "tool_result", "tool_use_id": "toolu_fake000000", "content": "wrote 1 byte"},
            {"type": "text", "text": "and now?"},
        ]
        assert server.failures_sent == 1 and server.count == 2


def test_anthropic_translation_edge_cases() -> None:
    system, turns, specs = to_anthropic(
        [
            {"role": "system", "content": "a"},
            {"role": "system", "content": "b"},
            {"role": "user", "content": ""},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "t1", "function": {"name": "f", "arguments": "not json"}},
                    {"id": "t2", "function": {"name": "g", "arguments": "[1]"}},
                ],
            },
        ]
    )
    assert system == "a\n\nb" and specs == []
    assert turns == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"raw": "not json"}},
                {"type": "tool_use", "id": "t2", "name": "g", "input": {"value": [1]}},
            ],
        }
    ]
    message, stop = from_anthropic({"content": [], "stop_reason": "max_tokens"})
    assert message == {"role": "assistant", "content": None} and stop == "length"


def test_bad_model_config_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"model\.base_url: base_url must start"):
        build_model({"adapter": "openai", "model": "m", "base_url": "ftp://x"}, base_dir=tmp_path)
    with pytest.raises(BadInput, match="model: "):
        build_model({"adapter": "nope"}, base_dir=tmp_path)


def test_tool_results_recorded_as_json_values_are_sent_as_text(tmp_path: Path) -> None:
    with FakeOpenAIServer(SCRIPT) as server:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "tool_call_id": "c", "content": {"exit": 0, "output": "ok"}},
        ]
        openai(server, tmp_path).complete(messages)
        assert server.requests[0]["messages"][2]["content"] == '{"exit": 0, "output": "ok"}'
