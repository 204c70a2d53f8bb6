"""Helpers of the ``cli`` desk tests: a desk running the test agent client (a real process,
through the ``generic`` profile), reading the journal the forge holds."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from tests.desks.world import World
from tests.fakes.wire import WireFake
from tests.forge_fixtures import wait_until

AGENT = Path(__file__).resolve().parent.parent / "gateway" / "agent_client.py"
KEY = "sk-desk-upstream-key-5e1b0c"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


SCRIPT = [
    {"tool_calls": [call("Write", path="hello.txt", content="hello\n")]},
    {"tool_calls": [call("Bash", command="cat hello.txt")]},
    {"content": "all done"},
]


def add_cli_desk(
    world: World, fake: WireFake, *, api: str = "openai-chat", stream: bool = False, **extra: Any
) -> None:
    model: dict[str, Any] = {"model": "upstream-model", "api_key_env": "ASSAY_TEST_UPSTREAM_KEY"}
    if api == "anthropic":
        model.update(adapter="anthropic", base_url=fake.url)
    else:
        model.update(adapter="openai", base_url=f"{fake.url}/v1")
    flags = ["--stream"] if stream else []
    argv = [sys.executable, str(AGENT), "--api", api, *flags, "{prompt}"]
    cli: dict[str, Any] = {"profile": "generic", "command": argv}
    cli.update(extra.pop("cli", {}))
    manifest = {
        "name": "cli",
        "kind": "cli",
        "takes": {"globs": ["*"]},
        "cli": cli,
        "model": {**model, "attempts": 2, "backoff_s": 0},
        "tools": ["Write", "Bash"],
        "lease": 30,
        "sandbox": {"read_only": [str(AGENT.parent)]},  # the agent script, in bubblewrap
        **extra,
    }
    (world.desks / "cli.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")


def journal_folder(world: World, brief: str, into: Path) -> Path:
    """The brief's journal as the forge's journal ref holds it, extracted into ``into``."""
    ref = f"refs/assay/journal/{brief}"
    archive = subprocess.run(
        ["git", f"--git-dir={world.forge_path}", "archive", ref, ".assay/journal"],
        capture_output=True,
        check=True,
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / ".assay" / "journal" / brief


def agent_rows(world: World, brief: str, into: Path) -> list[str]:
    listed = world.assay("history", "--journal", str(journal_folder(world, brief, into)))
    assert listed.returncode == 0, listed.stderr
    return [line for line in listed.stdout.splitlines() if " agent " in line]


def processes_in(directory: Path) -> list[int]:
    """Processes whose working directory is ``directory`` (a CLI left working in a tree)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if Path(os.readlink(proc / "cwd")) == directory:
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def kill_and_resume(
    world: World,
    desk: str,
    brief: str,
    kills: Iterable[int],
    *,
    reached: Callable[[int], bool],
    timeout: float,
    after_kill: Callable[[], None] = lambda: None,
) -> subprocess.CompletedProcess[str]:
    """Run ``desk`` on ``brief`` and SIGKILL it once ``reached(n)`` for each ``n`` of
    ``kills`` (then ``after_kill``, and the lease's expiry), then run it to its end."""
    for threshold in kills:
        proc = world.start_desk(desk, "--once", "--brief", brief)
        wait_until(lambda n=threshold: reached(n), timeout=timeout, what=f"call {threshold}")
        world.kill(proc)
        after_kill()
        wait_until(lambda: world.claim_expired(brief), timeout=60, what="the lease to expire")
    return world.desk(desk, "--once", "--brief", brief)
