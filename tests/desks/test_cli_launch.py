"""``launch_cli``, the one place an agent CLI starts: its environment is built from
scratch, and an unsandboxed CLI dies with the process that launched it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import assay_env
from tests.forge_fixtures import wait_until

PARENT = """
import sys
from pathlib import Path
from assay.desks.kinds.cli import launch_cli

SHOW = "import os, time; print(sorted(os.environ), flush=True); time.sleep(300)"

class Launch:
    argv = [sys.executable, "-c", SHOW]
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}
    files = {Path(sys.argv[1]) / ".cfg" / "x.json": b"{}"}

process = launch_cli(Launch, cwd=Path(sys.argv[1]), home=Path(sys.argv[1]))
print(process.process.pid, flush=True)
process.process.wait()
"""


def _exec_done(pid: int) -> bool:
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    return b"time.sleep" in cmdline and b"execvp" not in cmdline


def _gone(pid: int) -> bool:
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


def test_an_unsandboxed_cli_dies_with_its_launcher_and_sees_no_desk_secret(tmp_path: Path) -> None:
    env = assay_env({"ASSAY_TEST_UPSTREAM_KEY": "sk-must-not-leak"})
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert (tmp_path / ".cfg" / "x.json").read_bytes() == b"{}"  # the profile's file
    wait_until(lambda: _exec_done(child), what="the CLI to run (past the launch prelude)")
    os.kill(parent.pid, signal.SIGKILL)  # only the launcher: the CLI is in its own session
    parent.wait()
    parent.stdout.close()
    wait_until(lambda: _gone(child), timeout=10, what="the CLI to die with its launcher")


def test_the_cli_environment_is_the_profile_s_plus_path_home_lang(tmp_path: Path) -> None:
    script = PARENT.replace("time.sleep(300)", "pass").replace(
        "print(process.process.pid, flush=True)",
        "process.process.wait(); print(process.tail())",
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        env=assay_env({"ASSAY_TEST_UPSTREAM_KEY": "sk-must-not-leak"}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "['ANTHROPIC_BASE_URL', 'HOME', 'LANG', 'PATH']" in done.stdout
