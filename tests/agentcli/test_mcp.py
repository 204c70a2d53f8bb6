"""Each profile that can registers an MCP server over streamable HTTP with its real CLI: the
CLI offers the server's tool to the model, calls it when the model asks, with the token as
its bearer, and sends the tool's answer back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.agentcli.profiles import get_profile
from tests.agentcli.clis import cli_path, run_launch
from tests.agentcli.mcp_echo import McpEcho
from tests.fakes.wire import WireFake

TOKEN = "assay-test-token-mcp"

# How each CLI names the MCP tool, offered and called.
CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "claude-code": ("claude", "claude-sonnet-4-5", {"name": "mcp__assay__note"}),
    "codex": ("codex", "gpt-5-codex", {"namespace": "mcp__assay", "name": "note"}),
    "gemini-cli": ("gemini", "gemini-2.5-pro", {"name": "mcp_assay_note"}),
}
NAMES = {"gemini-cli": "mcp_assay_note"}  # the tool's name as offered, when not Claude's


def offered(body: dict[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        for declared in tool.get("functionDeclarations") or []:  # Gemini
            names.add(declared["name"])
        if tool.get("type") == "namespace":  # Codex groups a server's tools in a namespace
            names |= {f"{tool['name']}__{t['name']}" for t in tool.get("tools", [])}
        elif "name" in tool:
            names.add(tool["name"])
    return names


@pytest.mark.parametrize("profile", sorted(CASES))
def test_the_cli_calls_the_registered_mcp_tool(profile: str, tmp_path: Path) -> None:
    binary, model, call = CASES[profile]
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    script = [{"tool_calls": [{**call, "arguments": {"text": "step one done"}}]}, {"content": "ok"}]
    with McpEcho() as mcp, WireFake(script) as fake:
        launch = get_profile(profile).launch(
            command=None,
            workdir=work,
            home=home,
            gateway_url=fake.url,
            token=TOKEN,
            model=model,
            prompt="Take a note.",
            tools=[],  # no built-in tool: the MCP server's are the only ones
            mcp_url=mcp.url,
        )
        done = run_launch(launch, workdir=work, home=home, binary=cli_path(binary))
        assert done.returncode == 0, done.stderr + done.stdout
        assert fake.answered == 2
        first, second = fake.turn_requests()
    assert NAMES.get(profile, "mcp__assay__note") in offered(first.body)
    if profile == "claude-code":  # Codex always offers its own tools
        assert offered(first.body) == {"mcp__assay__note"}
    assert mcp.notes == ["step one done"]
    assert set(mcp.authorizations) == {f"Bearer {TOKEN}"}
    assert "noted: step one done" in json.dumps(second.body)
