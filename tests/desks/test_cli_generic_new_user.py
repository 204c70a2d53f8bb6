"""A CLI set up through the ``generic`` profile from docs/agent-clis.md alone, as a new user
would: Qwen Code run by its own command line, pointed at the gateway by the variables the
generic profile sets (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``: the run's token), with its
settings file written into its private HOME by ``cli.files`` (the MCP server at
``{mcp_url}``, the token only in that file, never on its command line). It runs its shell
tool and finishes through Assay's MCP server. (The shipped ``qwen-code`` profile does all
this and more: tests/desks/test_cli_qwen.py.)"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.desks.cli_scene import KEY, use_cli
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake

# The desk file a new user writes from the docs' "A CLI with no profile" section.
DESK = """\
name: qwen
kind: cli
takes: {globs: ["*"]}
cli:
  profile: generic
  command: [qwen, --approval-mode=yolo, "--model={model}", "--prompt={prompt}"]
  files:
    .qwen/settings.json: |
      {"security": {"auth": {"selectedType": "openai"}},
       "permissions": {"deny": ["tool_search", "tool_call"]},
       "tools": {"shell": {"enableInteractiveShell": true}},
       "mcpServers": {"assay": {"httpUrl": "{mcp_url}", "trust": true,
                                "headers": {"Authorization": "Bearer {token}"}}}}
model: {adapter: openai, model: fake-model, base_url: BASE, api_key_env: ASSAY_TEST_UPSTREAM_KEY}
tools: [run_shell_command, finish]
sandbox: {toolchains: [python, node]}
"""
FINISH = {"summary": "Wrote a.txt.", "evidence": [{"row": "unit", "result": "pass"}]}
SCRIPT = [
    {"tool_calls": [{"name": "run_shell_command", "arguments": {"command": "echo hi > a.txt"}}]},
    {"tool_calls": [{"name": "mcp__assay__finish", "arguments": FINISH}]},
    {"content": "Done."},
]


@pytest.mark.slow
def test_qwen_code_through_the_generic_profile_as_the_docs_say(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_cli(monkeypatch, "qwen")
    world.add_briefs(brief_text("gen", body="Write a.txt."))
    with WireFake(SCRIPT) as fake:
        text = DESK.replace("BASE", fake.openai_base_url)
        assert yaml.safe_load(text)["cli"]["profile"] == "generic"
        (world.desks / "qwen.yaml").write_text(text, encoding="utf-8")
        done = world.desk("qwen", "--once", "--brief", "gen")
        assert done.returncode == 0, done.stdout + done.stderr
        turns = fake.turn_requests()
    assert [t.turn for t in turns] == [0, 1, 2]
    assert all(t.headers["authorization"] == f"Bearer {KEY}" for t in turns)
    # it connects to MCP servers while it starts: by the call that finishes, it offers finish
    offered = {t["function"]["name"] for t in turns[1].body["tools"]}
    assert {"run_shell_command", "mcp__assay__finish"} <= offered
    assert "Bearer" not in json.dumps([t.body for t in turns])  # the token stayed in HOME
    assert world.show("assay/gen:a.txt") == "hi\n"
    (ended,) = world.outputs("gen", "cli.exit")
    assert ended["finish"]["summary"] == FINISH["summary"]
