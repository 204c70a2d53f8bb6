"""The registry of wire APIs seen from outside, over real HTTP on loopback: a route the
gateway does not serve gets a message the CLI shows (in its API's error shape when the path
says which API it is) and the desk's log the same; the Gemini routes' token, upstream path
and key; the journal schema and the MCP tool names every CLI uses, pinned to the registry."""

from __future__ import annotations

import httpx
import pytest

from assay.gateway.server import UNROUTED_KEPT, Gateway


def test_a_gemini_route_is_answered_with_a_message_naming_the_api_to_use() -> None:
    logged: list[str] = []
    with Gateway(on_unrouted=logged.append) as gateway:
        path = "/v1beta/models/gemini-2.5-pro:embedContent"
        answer = httpx.post(
            f"{gateway.url}{path}?alt=sse", json={"contents": []}, headers={"x-goog-api-key": "k"}
        )
        assert answer.status_code == 404
        error = answer.json()["error"]
        assert error["status"] == "NOT_FOUND" and error["code"] == 404  # Google's shape
        assert error["message"] == (
            f"no gateway route for POST {path}: the desk's CLI speaks the Gemini API "
            "(`cli.api: gemini`), of which the gateway serves POST "
            "/v1beta/models/{model}:generateContent, "
            "/v1beta/models/{model}:streamGenerateContent, /v1beta/models/{model}:countTokens"
        )
        assert logged == [error["message"]] == gateway.unrouted
        assert gateway.calls.empty()  # nothing reached the run


def test_an_unknown_route_lists_what_the_gateway_serves_and_is_logged_once() -> None:
    logged: list[str] = []
    with Gateway(on_unrouted=logged.append) as gateway:
        for _ in range(3):
            answer = httpx.post(f"{gateway.url}/api/chat", json={}, headers={"x-api-key": "x"})
            assert answer.status_code == 404
        message = answer.json()["error"]["message"]
        assert message.startswith("no gateway route for POST /api/chat: the gateway serves ")
        assert "POST /v1/messages" in message and "POST /v1/responses" in message
        assert logged == [message]  # a CLI retrying does not flood the desk's log
        got = httpx.get(f"{gateway.url}/v1/models", headers={"x-api-key": gateway.token})
        assert got.status_code == 404 and "GET /v1/models" in got.json()["error"]["message"]
        assert httpx.head(f"{gateway.url}/").status_code == 404  # Claude Code's probe
        assert logged == [message]  # probes are answered, not logged
        # A served route asked with another method names its API, in that API's shape.
        got = httpx.get(f"{gateway.url}/v1/messages", headers={"x-api-key": gateway.token})
        assert got.status_code == 404 and got.json()["type"] == "error"
        assert "speaks the Anthropic Messages API" in got.json()["error"]["message"]


def test_a_flood_of_unknown_routes_is_remembered_only_up_to_a_bound() -> None:
    with Gateway() as gateway:
        with httpx.Client(base_url=gateway.url) as client:
            for n in range(UNROUTED_KEPT + 5):
                assert client.post(f"/nowhere/{n}", json={}).status_code == 404
        assert len(gateway.unrouted) == UNROUTED_KEPT


def test_the_journal_schema_names_every_registered_api() -> None:
    import json

    from assay.gateway.apis import API_NAMES
    from tests.conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / "journal-entry.schema.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    found = [
        branch["then"]["properties"]["api"]["enum"]
        for branch in schema["allOf"]
        if "api" in branch.get("then", {}).get("properties", {})
    ]
    assert found == [list(API_NAMES)]


def test_assay_s_mcp_tools_are_declared_under_every_cli_s_name_for_them_only() -> None:
    from assay.gateway.calls import tool_allowed

    offered = ["finish", "request_approval"]
    for name in ("mcp__assay__finish", "mcp_assay_finish", "assay__request_approval"):
        assert tool_allowed(name, ["Bash"], offered), name
    for name in ("mcp_evil_finish", "mcp_assay_teleport", "mcp_assayfinish", "finish"):
        assert not tool_allowed(name, ["Bash"], offered), name
    assert tool_allowed("Bash", ["Bash"], offered)


def test_the_gemini_routes_take_the_token_only_in_a_header() -> None:
    route = "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
    with Gateway() as gateway:
        for url, headers in (
            (f"{gateway.url}{route}?alt=sse", {}),
            (f"{gateway.url}{route}?alt=sse&key={gateway.token}", {}),  # a key in a URL leaks
            (f"{gateway.url}{route}", {"x-goog-api-key": gateway.token[:-1]}),
            (f"{gateway.url}{route}", {"x-api-key": gateway.token}),  # not Gemini's header
        ):
            answer = httpx.post(url, json={"contents": []}, headers=headers)
            assert answer.status_code == 401, (url, headers)
            assert answer.json()["error"]["status"] == "UNAUTHENTICATED"  # Google's shape
        assert gateway.calls.empty()


@pytest.mark.parametrize("base", ["", "/v1beta"])
def test_the_gemini_upstream_puts_the_desk_s_model_in_the_path_and_its_key_in_its_header(
    monkeypatch: pytest.MonkeyPatch, base: str
) -> None:
    from assay.gateway.upstream import Upstream
    from assay.models.config import GeminiConfig
    from tests.fakes.wire import WireFake

    monkeypatch.setenv("ASSAY_GEMINI_TEST_KEY", "gk-desk-key")
    tools = [{"functionDeclarations": [{"name": "Bash"}]}]
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}], "tools": tools}
    with WireFake([{"content": "hi", "usage": {"in_tokens": 7, "out_tokens": 3}}] * 2) as fake:
        config = GeminiConfig(
            adapter="gemini",
            model="desk-model",
            base_url=fake.url + base,
            api_key_env="ASSAY_GEMINI_TEST_KEY",
        )
        upstream = Upstream(config)
        try:
            streamed, answer = upstream.forward(
                "gemini", "/v1beta/models/cli-model:streamGenerateContent", body, {}
            )
            whole, _ = upstream.forward(
                "gemini", "/v1beta/models/cli-model:generateContent", body, {}
            )
        finally:
            upstream.close()
        first, second = fake.seen
    assert first.path == "/v1beta/models/desk-model:streamGenerateContent?alt=sse"
    assert second.path == "/v1beta/models/desk-model:generateContent"
    assert first.headers["x-goog-api-key"] == "gk-desk-key" and "authorization" not in first.headers
    assert first.body == body  # the model is the path's: nothing added to the body
    assert streamed.stream and not whole.stream
    assert answer is not None and (answer.in_tokens, answer.out_tokens) == (7, 3)
