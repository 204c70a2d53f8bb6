"""A desk that declares `isolation: off` runs, the journal and the board say so, and a
SIGKILLed supervisor leaves none of its unsandboxed processes running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.desks import parse_manifest
from assay.errors import BadInput
from assay.forge import open_forge
from assay.forgestate.rows import collect_board
from tests.conftest import assay_env
from tests.desks.cli_helpers import KEY, add_cli_desk, processes_in
from tests.desks.world import World, brief_text, call, finish
from tests.fakes.wire import WireFake
from tests.forge_fixtures import wait_until
from tests.sandbox.probe import lock_is_free


@pytest.mark.parametrize(
    ("sandbox", "sandboxed"),
    [(None, True), ({"network": "host", "isolation": "off"}, False)],
)
def test_the_start_entry_and_the_board_record_how_the_run_was_confined(
    world: World, sandbox: dict[str, str] | None, sandboxed: bool
) -> None:
    world.add_briefs(brief_text("b1"))
    extra = {"sandbox": sandbox} if sandbox else {}
    world.add_desk(
        "coder",
        [{"tool_calls": [call("run", command="true")]}, finish("done")],
        tools=("run", "finish"),
        run={"allow": ["true"]},
        **extra,
    )
    [report] = world.run_here("coder")
    assert report.code == 0, report
    [start] = [e for e in world.wal("a", "coder", "b1") if e["kind"] == "start"]
    assert start["sandbox"]["sandboxed"] is sandboxed
    with open_forge(world.url, cache_dir=world.root / "board-cache") as forge:
        board, _ = collect_board(forge)
    [row] = [r for r in board.rows if r.id == "b1"]
    assert ("unsandboxed run" in row.status_note) is not sandboxed


def test_isolation_off_must_say_network_host() -> None:
    text = (
        "name: d\nkind: agent\nmodel: {adapter: scripted, script: s.json}\ntools: [finish]\n"
        "sandbox: {isolation: off}\n"
    )
    with pytest.raises(BadInput, match=r"d\.yaml.*sandbox\.network.*network: host"):
        parse_manifest(text, source="desks/d.yaml")


# A tool that double-forks: the subshell's `setsid flock` is orphaned at once (re-parented
# away from the tool), holds the lock in a session of its own, and says so; the tool itself
# then runs on, as a long test suite would, until the desk is killed under it.
ESCAPEE = "(setsid flock escapee.lock sh -c 'touch ready; exec sleep 600' &); exec sleep 600"

LAUNCHER = """
import sys
from pathlib import Path
from assay.sandbox import SandboxSpec, start_sandboxed

process = start_sandboxed(
    ["/bin/sh", "-c", sys.argv[2]],
    cwd=Path(sys.argv[1]),
    env={"PATH": "/usr/bin:/bin"},
    spec=SandboxSpec(network="host", isolation="off"),
    timeout_s=None,
    max_output_bytes=1000,
)
process.wait()
"""


def test_a_killed_supervisor_takes_an_unsandboxed_double_fork_down(tmp_path: Path) -> None:
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(tmp_path), ESCAPEE],
        env=assay_env({}),
        start_new_session=True,
    )
    try:
        wait_until(lambda: (tmp_path / "ready").exists(), timeout=60, what="the escapee")
        assert not lock_is_free(tmp_path / "escapee.lock")
        os.kill(launcher.pid, signal.SIGKILL)  # the supervisor alone, as a crash would
        launcher.wait(timeout=30)
        wait_until(lambda: lock_is_free(tmp_path / "escapee.lock"), timeout=30, what="the end")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=30)


def test_a_killed_unsandboxed_cli_desk_leaves_no_tool_running(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_TEST_UPSTREAM_KEY", KEY)
    world.add_briefs(brief_text("escape"))
    script: list[dict[str, Any]] = [
        {"tool_calls": [call("Bash", command=ESCAPEE)]},
        {"content": "done"},
    ]
    with WireFake(script) as fake:
        add_cli_desk(world, fake, sandbox={"isolation": "off", "network": "host"})
        desk = world.start_desk("cli", "--once")
        work = world.root / "machine-a" / "work" / "cli" / "escape"
        ready = work / "ready"
        wait_until(ready.exists, timeout=120, what="the tool's escapee")
        lock = work / "escapee.lock"
        assert not lock_is_free(lock)
        os.kill(desk.pid, signal.SIGKILL)  # the desk alone: its CLI and tools must follow
        desk.wait(timeout=30)
        wait_until(lambda: lock_is_free(lock), timeout=30, what="the tool to die with the desk")
        wait_until(lambda: not processes_in(work), timeout=30, what="nothing left in the tree")
