"""``cli`` desks running the real agent CLIs (installed by ``.ci/install``) through
``assay desk run``, against the scripted upstream: Claude Code and Codex, each a 10-call
session SIGKILLed at three random instants and resumed by new processes."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.agentcli.clis import cli_path
from tests.desks.cli_helpers import agent_rows, kill_and_resume, processes_in
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake

KEY = "sk-real-cli-upstream-key-93c1"


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_TEST_UPSTREAM_KEY", KEY)
    bins = [str(cli_path(name).parent) for name in ("claude", "codex", "mini")]
    monkeypatch.setenv("PATH", os.pathsep.join([*bins, os.environ.get("PATH", "")]))


def add_desk(world: World, fake: WireFake, profile: str, tools: list[str], **extra: Any) -> None:
    if profile == "claude-code":
        model = {"adapter": "anthropic", "model": "claude-sonnet-4-5", "base_url": fake.url}
    else:
        model = {"adapter": "openai", "model": "gpt-5-codex", "base_url": fake.openai_base_url}
        if profile == "mini-swe-agent":
            model["model"] = "fake-model"
    manifest = {
        "name": profile,
        "kind": "cli",
        "takes": {"globs": ["*"]},
        "cli": {"profile": profile},
        "model": {**model, "api_key_env": "ASSAY_TEST_UPSTREAM_KEY", "attempts": 2},
        "tools": tools,
        "lease": "3s",
        "sandbox": {"toolchains": ["python", "node"]},
        **extra,
    }
    (world.desks / f"{profile}.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")


def worktree(world: World, desk: str, brief: str) -> Path:
    return world.root / "machine-a" / "work" / desk / brief


def claude_script(work: Path) -> list[dict[str, Any]]:
    first = {"name": "Write", "arguments": {"file_path": str(work / "log.txt"), "content": "0\n"}}
    steps = [
        {"name": "Bash", "arguments": {"command": f"echo {i} >> log.txt", "description": "log"}}
        for i in range(1, 9)
    ]
    return [{"tool_calls": [c]} for c in [first, *steps]] + [{"content": "Logged nine lines."}]


def codex_script(work: Path) -> list[dict[str, Any]]:
    steps = [
        {"name": "exec_command", "arguments": {"cmd": f"echo {i} >> log.txt"}} for i in range(9)
    ]
    return [{"tool_calls": [c]} for c in steps] + [{"content": "Logged nine lines."}]


def mini_script(work: Path) -> list[dict[str, Any]]:
    steps = [{"name": "bash", "arguments": {"command": f"echo {i} >> log.txt"}} for i in range(9)]
    done = {"name": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}
    return [{"content": f"Step {i}.", "tool_calls": [c]} for i, c in enumerate([*steps, done])]


CASES: dict[str, tuple[list[str], Callable[[Path], list[dict[str, Any]]]]] = {
    "claude-code": (["Bash", "Write", "Read"], claude_script),
    "codex": (["exec_command"], codex_script),
    "mini-swe-agent": (["bash"], mini_script),
}


@pytest.mark.slow
@pytest.mark.parametrize("profile", sorted(CASES))
def test_a_real_cli_killed_at_three_random_instants_pays_each_call_once(
    world: World, cli_env: None, tmp_path: Path, profile: str
) -> None:
    tools, make_script = CASES[profile]
    world.add_briefs(brief_text("crash", body="Log nine lines."))
    script = make_script(worktree(world, profile, "crash"))
    with WireFake(script) as fake:
        add_desk(world, fake, profile, tools)
        kills = sorted(random.sample(range(1, 10), 3))
        final = kill_and_resume(
            world, profile, "crash", kills, reached=lambda n: fake.answered >= n, timeout=120
        )
        assert final.returncode == 0, final.stderr + final.stdout
        paid = fake.answered
    assert 10 <= paid <= 10 + len(kills), kills
    log = world.show("assay/crash:log.txt")
    assert log == "".join(f"{i}\n" for i in range(9))
    assert len(agent_rows(world, "crash", tmp_path / "x")) == 9


def test_claude_code_asks_for_approval_over_mcp_suspends_and_gets_the_answer(
    world: World, cli_env: None
) -> None:
    world.add_briefs(brief_text("ship", body="Ship it after approval."))
    work = worktree(world, "claude-code", "ship")
    script = [
        {
            "tool_calls": [
                {"name": "Write", "arguments": {"file_path": str(work / "a.txt"), "content": "a\n"}}
            ]
        },
        {"tool_calls": [{"name": "mcp__assay__request_approval", "arguments": {"reason": "ship"}}]},
        {
            "tool_calls": [
                {
                    "name": "Bash",
                    "arguments": {"command": "echo shipped >> a.txt", "description": "ship"},
                }
            ]
        },
        {"content": "Shipped."},
    ]
    with WireFake(script) as fake:
        add_desk(world, fake, "claude-code", ["Bash", "Write"])
        waiting = world.desk("claude-code", "--once")
        assert waiting.returncode == 75, waiting.stdout + waiting.stderr
        assert fake.answered == 2
        assert not processes_in(work)  # a suspended run holds no process
        record = world.claim("ship")
        assert record is not None and record.waiting_for == "approval"
        world.event("ship", "approve", text="go ahead", actor="ann")
        done = world.desk("claude-code", "--once")
        assert done.returncode == 0, done.stdout + done.stderr
        assert fake.answered == 4  # the two recorded calls were replayed, not paid again
        answer = fake.turn_requests()[-2].body
        assert "go ahead" in str(answer["messages"][-1])  # the tool result the agent got
    tree = world.show("assay/ship:a.txt")
    assert tree == "a\nshipped\n"


def test_steering_reaches_a_real_cli_once(world: World, cli_env: None) -> None:
    world.add_briefs(brief_text("steer"))
    work = worktree(world, "claude-code", "steer")
    script = claude_script(work)[-3:]
    with WireFake(script) as fake:
        add_desk(world, fake, "claude-code", ["Bash", "Write"])
        world.event("steer", "signal", text="prefer tabs", actor="ann")
        done = world.desk("claude-code", "--once")
        assert done.returncode == 0, done.stdout + done.stderr
        bodies = [str(t.body["messages"]) for t in fake.turn_requests()]
    assert "Steering from ann: prefer tabs" in bodies[0]
    assert sum("prefer tabs" in b for b in bodies) == 1
    intents = [e for e in world.journal("steer").entries if e.get("steer")]
    assert len(intents) == 1


def test_a_tool_the_desk_does_not_declare_never_reaches_the_cli(
    world: World, cli_env: None
) -> None:
    world.add_briefs(brief_text("deny"))
    work = worktree(world, "claude-code", "deny")
    script = [
        {
            "tool_calls": [
                {"name": "Bash", "arguments": {"command": "touch pwned", "description": "x"}}
            ]
        },
        {"content": "never"},
    ]
    with WireFake(script) as fake:
        add_desk(world, fake, "claude-code", ["Write", "Read"])
        done = world.desk("claude-code", "--once")
        assert fake.answered == 1
    assert done.returncode == 77, done.stdout + done.stderr
    assert not (work / "pwned").exists()
    assert "touch pwned" not in world.tree("deny")
    denied = [e for e in world.journal("deny").entries if e["kind"] == "denied"]
    assert len(denied) == 1 and "'Bash'" in denied[0]["reason"]
