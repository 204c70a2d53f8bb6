"""A real CLI SIGKILLed while the scripted upstream holds its call in flight: the work tree
shows what the CLI did before that call, and the held call is the only one answered after
the kill (what a desk's crash tests count on)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from assay.agentcli.profiles import get_profile
from tests.agentcli.clis import cli_path, start_launch
from tests.agentcli.test_sessions import claude_script, codex_script, mini_script
from tests.fakes.wire import WireFake

# binary, model, tools, and hello.py once the script's turns 0-2 ran (Codex edits at turn 2)
CASES = {
    "claude-code": ("claude", "claude-sonnet-4-5", ["Bash", "Read", "Write", "Edit"], "hello"),
    "codex": ("codex", "gpt-5-codex", ["exec_command"], "bye"),
    "mini-swe-agent": ("mini", "fake-model", ["bash"], "bye"),
}
SCRIPTS = {
    "claude-code": claude_script,
    "codex": lambda work: codex_script(),
    "mini-swe-agent": lambda work: mini_script(),
}


@pytest.mark.parametrize("profile", sorted(CASES))
def test_sigkill_during_a_held_call(profile: str, tmp_path: Path) -> None:
    binary, model, tools, word = CASES[profile]
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    script = SCRIPTS[profile](work)
    with WireFake(script) as fake:
        fake.hold(at_turn=3)
        launch = get_profile(profile).launch(
            command=None,
            workdir=work,
            home=home,
            gateway_url=fake.url,
            token="t",
            model=model,
            prompt="Make hello.py print bye.",
            tools=tools,
            mcp_url=None,
        )
        process = start_launch(launch, workdir=work, home=home, binary=cli_path(binary))
        try:
            fake.wait_for_in_flight(1, timeout=60)
            assert fake.answered == 3
            os.killpg(process.pid, signal.SIGKILL)
        finally:
            process.kill()
            process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL
        fake.release()
        fake.wait_for_answered(4)  # the held call is answered to a client that is gone
        assert (work / "out.txt").read_text() == "hello\n"  # turns 0-2 ran, turn 3 did not
        assert (work / "hello.py").read_text() == f"print('{word}')\n"
        assert [t.turn for t in fake.turn_requests()] == [0, 1, 2, 3]
