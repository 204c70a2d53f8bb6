"""The real agent CLIs register Assay's MCP server over streamable HTTP (as their profiles
launch them) and call its tools because the scripted model asks them to: the calls reach
the ToolBox, their results reach the model's next request, and refusals come back to the
model as tool errors with nothing done."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assay.agentcli.profiles import Launch, get_profile
from assay.desks.kinds.tools import ToolBox, ToolPolicy
from assay.gateway.mcp import build_mcp_app
from tests.agentcli.clis import cli_path, run_launch
from tests.agentcli.test_sessions import sent
from tests.fakes.wire import WireFake
from tests.gateway.mcp_harness import CountingBridge, serve_in_gateway

TOKEN = "assay-mcp-cli-token-5d1c"
POLICY = ToolPolicy(
    allowed=frozenset({"read_file", "write_file", "list_files", "run", "finish"}),
    run_prefixes=(("echo",),),
)
EVIDENCE = {"row": "notes", "result": "pass", "note": "notes.txt exists"}


@contextlib.contextmanager
def desk(tmp_path: Path, *, token: str = TOKEN) -> Iterator[tuple[str, CountingBridge, Path]]:
    """The MCP server over the work tree's ToolBox, routed as the gateway routes it."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    bridge = CountingBridge(
        ToolBox(workdir, POLICY),
        approver=lambda reason: {"approved": True, "by": "ada", "reason": reason},
        messages=lambda: ["prefer small commits"],
    )
    with serve_in_gateway(build_mcp_app(bridge, token=token)) as url:
        yield url, bridge, workdir


def launch(
    profile: str, fake: WireFake, tmp_path: Path, mcp_url: str, *, model: str, tools: list[str]
) -> tuple[Launch, Path]:
    home = tmp_path / "home"
    home.mkdir()
    built = get_profile(profile).launch(
        command=None,
        workdir=tmp_path / "work",
        home=home,
        gateway_url=fake.url,
        token=TOKEN,
        model=model,
        prompt="Write notes.txt, echo it, then finish.",
        tools=tools,
        mcp_url=mcp_url,
    )
    return built, home


def script(call: Any) -> list[dict[str, Any]]:
    """Nine MCP calls (a path escape, a command off the allowlist and two calls in one turn
    among them), then the final answer."""
    return [
        {
            "content": "Writing.",
            "tool_calls": [call("write_file", path="notes.txt", content="n\n")],
        },
        {"tool_calls": [call("write_file", path="../escaped.txt", content="x")]},
        {"tool_calls": [call("run", command="echo ran-through-mcp")]},
        {"tool_calls": [call("run", command="rm -rf .")]},
        {
            "tool_calls": [
                call("write_file", path="a.txt", content="parallel-a"),
                call("write_file", path="b.txt", content="parallel-bb"),
            ]
        },
        {"tool_calls": [call("request_approval", reason="publish the notes")]},
        {"tool_calls": [call("check_messages")]},
        {"tool_calls": [call("finish", summary="notes written", evidence=[EVIDENCE])]},
        {"content": "Finished."},
    ]


def assert_session(fake: WireFake, bridge: CountingBridge, workdir: Path, tmp_path: Path) -> None:
    assert fake.answered == 9
    # The two calls of one turn may arrive in either order; each ran once.
    assert bridge.calls[:4] == ["write_file", "write_file", "run", "run"]
    assert bridge.calls[4:6] == ["write_file", "write_file"]
    assert bridge.calls[6:] == ["request_approval", "check_messages", "finish"]
    turns = fake.turn_requests()
    assert sent(turns[1].body, '"bytes":2')
    assert sent(turns[2].body, "denied: path '../escaped.txt' leaves the work tree")
    assert sent(turns[3].body, "ran-through-mcp")
    assert sent(turns[4].body, "denied: command 'rm -rf .'")
    assert sent(turns[5].body, '"bytes":10') and sent(turns[5].body, '"bytes":11')
    assert sent(turns[6].body, '"reason":"publish the notes"')
    assert sent(turns[7].body, "prefer small commits")
    assert sent(turns[8].body, '"finished":true')
    assert (workdir / "notes.txt").read_text(encoding="utf-8") == "n\n"
    assert (workdir / "a.txt").read_text(encoding="utf-8") == "parallel-a"
    assert (workdir / "b.txt").read_text(encoding="utf-8") == "parallel-bb"
    assert not (tmp_path / "escaped.txt").exists()
    assert sorted(p.name for p in workdir.iterdir()) == ["a.txt", "b.txt", "notes.txt"]


def claude_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": f"mcp__assay__{name}", "arguments": arguments}


def codex_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "mcp__assay", "arguments": arguments}


def test_claude_code_calls_the_desk_tools_through_mcp(tmp_path: Path) -> None:
    binary = cli_path("claude")
    with desk(tmp_path) as (url, bridge, workdir), WireFake(script(claude_call)) as fake:
        built, home = launch(
            "claude-code", fake, tmp_path, url, model="claude-sonnet-4-5", tools=["Read"]
        )
        done = run_launch(built, workdir=workdir, home=home, binary=binary)
        assert done.returncode == 0, done.stderr + done.stdout
        assert json.loads(done.stdout)["result"] == "Finished."
        offered = {tool["name"] for tool in fake.turn_requests()[0].body["tools"]}
        assert {f"mcp__assay__{d['name']}" for d in bridge.list_tools()} <= offered
        assert_session(fake, bridge, workdir, tmp_path)


def test_codex_calls_the_desk_tools_through_mcp(tmp_path: Path) -> None:
    binary = cli_path("codex")
    with desk(tmp_path) as (url, bridge, workdir), WireFake(script(codex_call)) as fake:
        built, home = launch("codex", fake, tmp_path, url, model="gpt-5-codex", tools=[])
        done = run_launch(built, workdir=workdir, home=home, binary=binary)
        assert done.returncode == 0, done.stderr + done.stdout
        assert "Finished." in done.stdout
        namespaces = [
            t for t in fake.turn_requests()[0].body["tools"] if t.get("name") == "mcp__assay"
        ]
        assert {t["name"] for t in namespaces[0]["tools"]} == {
            d["name"] for d in bridge.list_tools()
        }
        assert_session(fake, bridge, workdir, tmp_path)


def test_a_cli_with_a_wrong_token_is_offered_no_desk_tools(tmp_path: Path) -> None:
    binary = cli_path("claude")
    with (
        desk(tmp_path, token="the-desk-token") as (url, bridge, workdir),
        WireFake([{"content": "Nothing to call."}]) as fake,
    ):
        built, home = launch(
            "claude-code", fake, tmp_path, url, model="claude-sonnet-4-5", tools=["Read"]
        )
        done = run_launch(built, workdir=workdir, home=home, binary=binary)
        assert done.returncode == 0, done.stderr + done.stdout
        assert json.loads(done.stdout)["result"] == "Nothing to call."
        offered = {tool["name"] for tool in fake.turn_requests()[0].body["tools"]}
        assert offered == {"Read"}
        assert bridge.calls == [] and bridge.listed == 0
