"""The real Gemini CLI (installed by ``.ci/install``) as a ``cli`` desk through
``assay desk run``, against the scripted upstream speaking the Gemini API: SIGKILLed while
its streamed call (``streamGenerateContent?alt=sse``) is held inside the upstream, and
resumed by a new process that sends upstream again only the request that was in flight."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.agentcli.clis import cli_path
from tests.desks.cli_helpers import agent_rows, kill_and_resume
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake

KEY = "sk-gemini-upstream-key-4d7e"
STEPS = 5
HELD = 3  # the turn whose streamed request is in flight at the kill


@pytest.fixture
def gemini_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_TEST_UPSTREAM_KEY", KEY)
    monkeypatch.setenv(
        "PATH", os.pathsep.join([str(cli_path("gemini").parent), os.environ["PATH"]])
    )


def add_desk(world: World, fake: WireFake) -> None:
    manifest = {
        "name": "gemini",
        "kind": "cli",
        "takes": {"globs": ["*"]},
        "cli": {"profile": "gemini-cli"},
        "model": {
            "adapter": "gemini",
            "model": "gemini-2.5-pro",
            "base_url": fake.url,
            "api_key_env": "ASSAY_TEST_UPSTREAM_KEY",
            "attempts": 2,
        },
        "tools": ["run_shell_command"],
        "lease": "3s",
        "sandbox": {"toolchains": ["python", "node"]},
    }
    (world.desks / "gemini.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")


def script() -> list[dict[str, object]]:
    steps = [
        {"name": "run_shell_command", "arguments": {"command": f"echo {i} >> log.txt"}}
        for i in range(STEPS)
    ]
    return [{"tool_calls": [step]} for step in steps] + [{"content": "Logged five lines."}]


@pytest.mark.slow
def test_the_gemini_cli_killed_in_a_streamed_call_repays_only_that_request(
    world: World, gemini_env: None, tmp_path: Path
) -> None:
    world.add_briefs(brief_text("crash", body="Log five lines."))
    with WireFake(script()) as fake:
        add_desk(world, fake)
        fake.hold(at_turn=HELD)
        final = kill_and_resume(
            world,
            "gemini",
            "crash",
            [1],
            reached=lambda _: fake.in_flight >= 1,
            timeout=120,
            after_kill=fake.release,  # the held answer goes to a dead socket
        )
        assert final.returncode == 0, final.stderr + final.stdout
        turns = [s for s in fake.seen if s.turn is not None]
    # Every conversation request was a streamed one, on the Gemini route, with the real key.
    assert all(":streamGenerateContent" in s.path and s.stream for s in turns)
    assert all(s.headers.get("x-goog-api-key") == KEY for s in turns)
    # Only the request in flight at the kill reached the upstream twice.
    assert Counter(s.turn for s in turns) == {**{t: 1 for t in range(STEPS + 1)}, HELD: 2}
    assert world.show("assay/crash:log.txt") == "".join(f"{i}\n" for i in range(STEPS))
    assert len(agent_rows(world, "crash", tmp_path / "x")) == STEPS
