"""A real CLI SIGKILLed while the scripted upstream holds its call in flight: the work tree
shows what the CLI did before that call, and the held call is the only one answered after
the kill (what a desk's crash tests count on)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.agentcli.clis import cli_path, start_launch, work_and_home
from tests.agentcli.test_sessions import SCRIPTED, scripted_launch
from tests.fakes.wire import WireFake

# what hello.py prints once the script's turns 0-2 ran (Codex edits at turn 2)
WORDS = {"claude-code": "hello", "codex": "bye", "gemini-cli": "bye", "mini-swe-agent": "bye"}


@pytest.mark.parametrize("profile", sorted(SCRIPTED))
def test_sigkill_during_a_held_call(profile: str, tmp_path: Path) -> None:
    binary, _, _, script = SCRIPTED[profile]
    word = WORDS[profile]
    work, home = work_and_home(tmp_path)
    with WireFake(script(work)) as fake:
        fake.hold(at_turn=3)
        launch = scripted_launch(profile, workdir=work, home=home, url=fake.url)
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
