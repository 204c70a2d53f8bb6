"""The scripted upstream itself: its wire shapes as the official OpenAI SDK parses them, turn
selection, side requests, injected faults, holding a request in flight."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agentcli.clis import cli_path
from tests.conftest import REPO_ROOT
from tests.fakes.wire import WireFake, assistant_turns
from tests.fakes.wire_render import anthropic_events, anthropic_message

TURN = {
    "content": "Running it now.",
    "tool_calls": [{"name": "bash", "arguments": {"command": "echo 'a \"quoted\" arg'"}}],
    "usage": {"in_tokens": 11, "out_tokens": 7},
}
TOOLS = [{"name": "bash", "input_schema": {"type": "object"}}]


def post(fake: WireFake, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(fake.url + path, json=body, timeout=30)


def sse_events(text: str) -> list[tuple[str | None, str]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines.get("event"), lines["data"]))
    return events


def run_sdk(*args: str) -> subprocess.CompletedProcess[str]:
    """Run Python with the openai SDK (mini-swe-agent's venv has it) on ``args``."""
    python = cli_path("mini").parent / "python"
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_openai_sdk_parses_chat_and_responses_streamed_and_whole() -> None:
    with WireFake([TURN]) as fake:
        done = run_sdk(str(Path(__file__).with_name("openai_parse.py")), fake.openai_base_url)
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout)
        assert fake.answered == 4
    arguments = json.dumps(TURN["tool_calls"][0]["arguments"], sort_keys=True)
    message = got["chat"]["choices"][0]["message"]
    assert message["content"] == "Running it now."
    assert message["tool_calls"][0]["function"] == {"name": "bash", "arguments": arguments}
    assert got["chat_stream"] == {
        "text": "Running it now.",
        "calls": [{"name": "bash", "arguments": arguments}],
    }
    assert got["chat_stream_finish"] == "tool_calls"
    assert got["chat_stream_usage"] == 18
    for response in (got["responses"], got["responses_stream"]["final"]):
        kinds = [item["type"] for item in response["output"]]
        assert kinds == ["message", "function_call"]
        assert response["output"][0]["content"][0]["text"] == "Running it now."
        assert response["output"][1]["arguments"] == arguments
        assert response["usage"]["total_tokens"] == 18
    kinds = got["responses_stream"]["kinds"]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds


def test_anthropic_stream_rebuilds_the_whole_message() -> None:
    with WireFake([TURN]) as fake:
        whole = post(fake, "/v1/messages", {"messages": [], "tools": TOOLS}).json()
        streamed = post(
            fake, "/v1/messages?beta=true", {"messages": [], "tools": TOOLS, "stream": True}
        )
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = sse_events(streamed.text)
    assert [name for name, _ in events][:2] == ["message_start", "ping"]
    assert events[-1][0] == "message_stop"
    rebuilt: list[dict[str, Any]] = []
    for name, data in events:
        event = json.loads(data)
        assert event["type"] == name
        if name == "content_block_start":
            rebuilt.append(dict(event["content_block"], partial=""))
        elif name == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                rebuilt[event["index"]]["text"] += delta["text"]
            else:
                rebuilt[event["index"]]["partial"] += delta["partial_json"]
        elif name == "message_delta":
            assert event["delta"]["stop_reason"] == whole["stop_reason"] == "tool_use"
    for block in rebuilt:
        partial = block.pop("partial")
        if block["type"] == "tool_use":
            block["input"] = json.loads(partial)
    assert rebuilt == whole["content"]
    assert whole["content"][1]["input"] == TURN["tool_calls"][0]["arguments"]


def test_a_turn_renders_to_the_same_bytes_every_time() -> None:
    first = list(anthropic_events(anthropic_message(TURN, 3, "m")))
    assert first == list(anthropic_events(anthropic_message(TURN, 3, "m")))
    with WireFake([TURN]) as fake:
        bodies = {
            post(fake, "/v1/responses", {"input": [], "tools": TOOLS, "stream": True}).content
            for _ in range(2)
        }
    assert len(bodies) == 1


def test_turns_follow_the_history_and_side_requests_consume_none() -> None:
    script = [{"content": f"turn {i}"} for i in range(3)]
    one_turn_in = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "y"},
        {"role": "assistant", "content": "split"},
        {"role": "user", "content": "z"},
    ]
    with WireFake(script, side_text="side answer") as fake:
        title = post(fake, "/v1/messages", {"messages": one_turn_in, "max_tokens": 50})
        probe = post(fake, "/v1/messages", {"messages": [], "max_tokens": 1, "tools": TOOLS})
        count = post(fake, "/v1/messages/count_tokens", {"messages": one_turn_in, "tools": TOOLS})
        turn = post(fake, "/v1/messages", {"messages": one_turn_in, "tools": TOOLS})
        again = post(fake, "/v1/chat/completions", {"messages": one_turn_in, "tools": TOOLS})
        assert title.json()["content"][0]["text"] == "side answer"
        assert probe.status_code == 200 and count.json() == {"input_tokens": 100}
        assert turn.json()["content"][0]["text"] == "turn 1"
        assert again.json()["choices"][0]["message"]["content"] == "turn 1"
        assert (fake.answered, fake.side_answered, fake.received) == (2, 3, 5)
        assert [s.side for s in fake.seen] == [
            "no tools",
            "quota probe",
            "count_tokens",
            None,
            None,
        ]
        past_end = post(fake, "/v1/chat/completions", {"messages": one_turn_in * 3, "tools": TOOLS})
        assert past_end.status_code == 400 and "no scripted turn 3" in past_end.text


def test_responses_history_counts_runs_of_model_items() -> None:
    items = [
        {"type": "message", "role": "user", "content": []},
        {"type": "reasoning"},
        {"type": "function_call"},
        {"type": "function_call"},
        {"type": "function_call_output"},
        {"type": "function_call_output"},
        {"type": "message", "role": "assistant", "content": []},
        {"type": "message", "role": "user", "content": []},
    ]
    assert assistant_turns("openai-responses", {"input": items}) == 2
    assert assistant_turns("openai-responses", {"input": "just text"}) == 0


def test_by_count_answers_in_arrival_order() -> None:
    with WireFake([{"content": "a"}, {"content": "b"}], by="count") as fake:
        got = [
            post(fake, "/v1/chat/completions", {"messages": [], "tools": TOOLS}).json()
            for _ in range(2)
        ]
    assert [g["choices"][0]["message"]["content"] for g in got] == ["a", "b"]


def test_injected_faults_consume_no_turn() -> None:
    with WireFake([{"content": "fine"}]) as fake:
        fake.inject(429, retry_after="3")
        fake.inject("garbage", times=2)
        fake.inject("disconnect")
        body = {"messages": [], "tools": TOOLS}
        limited = post(fake, "/v1/messages", body)
        assert limited.status_code == 429 and limited.headers["retry-after"] == "3"
        assert limited.json()["type"] == "error"
        garbage = post(fake, "/v1/messages", body)
        assert garbage.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            garbage.json()
        streamed = post(fake, "/v1/responses", {**body, "stream": True})
        assert (
            streamed.headers["content-type"] == "text/event-stream" and "{not json" in streamed.text
        )
        with pytest.raises(httpx.RemoteProtocolError):
            post(fake, "/v1/messages", body)
        assert post(fake, "/v1/messages", body).json()["content"][0]["text"] == "fine"
        assert (fake.failures_sent, fake.answered) == (4, 1)
        assert [s.fault for s in fake.seen] == ["429", "garbage", "garbage", "disconnect", None]


def test_a_held_turn_waits_inside_the_server_until_released() -> None:
    script = [{"content": "zero"}, {"content": "one"}]
    with WireFake(script) as fake:
        fake.hold(at_turn=1)
        body = {"messages": [], "tools": TOOLS}
        assert post(fake, "/v1/messages", body).json()["content"][0]["text"] == "zero"
        later: list[httpx.Response] = []
        history = {"messages": [{"role": "assistant", "content": "zero"}], "tools": TOOLS}
        thread = threading.Thread(target=lambda: later.append(post(fake, "/v1/messages", history)))
        thread.start()
        fake.wait_for_in_flight(1)
        assert fake.answered == 1 and not later
        fake.release()
        fake.wait_for_answered(2)
        thread.join(10)
        assert later[0].json()["content"][0]["text"] == "one"
        with pytest.raises(TimeoutError, match="2 of 3 answered"):
            fake.wait_for_answered(3, timeout=0.2)


def test_models_route_and_unknown_routes() -> None:
    with WireFake([], model="fake-model") as fake:
        assert httpx.get(fake.url + "/v1/models").json()["data"][0]["id"] == "fake-model"
        assert post(fake, "/v1/embeddings", {}).status_code == 404
        assert [(s.api, s.status) for s in fake.seen] == [("other", 200), ("other", 404)]


def test_the_fake_runs_as_a_process_from_a_yaml_script(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("turns:\n  - content: from a process\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes", "wire", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        url = process.stdout.readline().strip()
        reply = httpx.post(url + "/v1/messages", json={"messages": [], "tools": TOOLS}, timeout=30)
        assert reply.json()["content"][0]["text"] == "from a process"
        assert process.stderr.readline().strip() == "count=1"
    finally:
        process.kill()
        process.communicate(timeout=30)


SDK_RESPONSES = """
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key="t", max_retries=0)
tools = [{"type": "custom", "name": "apply_patch"}]
with client.responses.stream(model="m", input="x", tools=tools) as events:
    kinds = [event.type for event in events]
    output = events.get_final_response().model_dump()["output"]
print(json.dumps({"kinds": kinds, "output": output}))
"""


def test_the_openai_sdk_parses_freeform_and_namespaced_calls() -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
    turn = {
        "tool_calls": [
            {"name": "apply_patch", "input": patch},
            {"namespace": "mcp__assay", "name": "note", "arguments": {"text": "x"}},
        ]
    }
    with WireFake([turn]) as fake:
        done = run_sdk("-c", SDK_RESPONSES, fake.openai_base_url)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    custom, namespaced = got["output"]
    assert (custom["type"], custom["name"], custom["input"]) == (
        "custom_tool_call",
        "apply_patch",
        patch,
    )
    assert (namespaced["namespace"], namespaced["name"]) == ("mcp__assay", "note")
    assert "response.custom_tool_call_input.delta" in got["kinds"]
