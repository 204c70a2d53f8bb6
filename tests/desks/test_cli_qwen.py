"""The real Qwen Code (installed by ``.ci/install``) as a ``cli`` desk through its shipped
profile, kept on relaunch and replay (``cli.resume: relaunch``: what a run killed before its
first resume point falls back to; its native resume: tests/desks/test_cli_resume.py): its
shell tool prints something new on every run, it is SIGKILLed while a streamed
chat-completions call is held inside the upstream, and the relaunched run sends upstream
again only that request, diverges nowhere and finishes through Assay's MCP server."""

from __future__ import annotations

import pytest

from tests.desks.cli_scene import (
    COMMANDS,
    KEY,
    add_desk,
    assert_resumed_cleanly,
    killed_and_resumed,
    tool_results,
    use_cli,
)
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake

FINISH = {"summary": "Ran the commands.", "evidence": [{"row": "unit", "result": "pass"}]}


def script() -> list[dict[str, object]]:
    shell = [
        {"name": "run_shell_command", "arguments": {"command": c, "description": "step"}}
        for c in COMMANDS
    ]
    finish = {"name": "mcp__assay__finish", "arguments": FINISH}
    return [{"tool_calls": [c]} for c in [*shell, finish]] + [{"content": "Done."}]


@pytest.mark.slow
def test_qwen_code_killed_in_a_call_is_relaunched_repaying_only_that_request(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_cli(monkeypatch, "qwen")
    world.add_briefs(brief_text("qwen", body="Run the commands."))
    turns = script()
    held = len(COMMANDS)  # the request that carries every shell result and asks to finish
    with WireFake(turns) as fake:
        add_desk(
            world, fake, "qwen-code", ["run_shell_command", "finish"], cli={"resume": "relaunch"}
        )
        scene = killed_and_resumed(world, fake, "qwen-code", "qwen", held=held)
    assert_resumed_cleanly(scene, len(turns))
    conversation = [s for s in scene.requests if s.turn is not None]
    assert all(s.stream and s.headers["authorization"] == f"Bearer {KEY}" for s in conversation)
    # the declared tools only, and Assay's (it connects to MCP servers while it starts: by
    # the call that finishes, it offers finish)
    offered = {t["function"]["name"] for t in conversation[held].body["tools"]}
    assert offered == {"run_shell_command", "mcp__assay__finish"} | offered & {
        "mcp__assay__request_approval",
        "mcp__assay__check_messages",
    }
    # relaunched, it ran its tools again: `date` printed a new time in the held request
    first, again = (s.body for s in conversation if s.turn == held)
    assert tool_results(first) != tool_results(again)
    assert world.show("assay/qwen:log.txt") == "stamp\n"  # the tree as one run leaves it
    (ended,) = world.outputs("qwen", "cli.exit")
    assert ended["finish"]["summary"] == FINISH["summary"]  # through Assay's MCP server
