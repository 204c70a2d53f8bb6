"""Finding the real agent CLIs that ``.ci/install`` puts in ``.venv/agent-clis`` and running
a profile's ``Launch`` the way a desk does (files written, the environment it gives plus
PATH/HOME/LANG, stdin from /dev/null, no shell)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assay.agentcli.profiles import Launch, get_profile
from tests.conftest import REPO_ROOT

BINARIES = {
    "claude": "node_modules/.bin/claude",
    "codex": "node_modules/.bin/codex",
    "gemini": "gemini-cli/node_modules/.bin/gemini",
    "mini": "mini-swe-agent/bin/mini",
    "qwen": "qwen-code/node_modules/.bin/qwen",
    "opencode": "opencode/node_modules/.bin/opencode",
    "aider": "aider/bin/aider",
}


def cli_roots() -> list[Path]:
    """Where the CLIs may be: $ASSAY_AGENT_CLIS, this checkout's .venv/agent-clis, and the
    agent-clis folder of the venv running the tests (a worktree sharing one venv)."""
    roots = [Path(p) for p in [os.environ.get("ASSAY_AGENT_CLIS", "")] if p]
    roots += [REPO_ROOT / ".venv" / "agent-clis", Path(sys.prefix) / "agent-clis"]
    return roots


def cli_path(name: str) -> Path:
    """The installed CLI ``name`` (a key of ``BINARIES``); fails the test if it is missing."""
    for root in cli_roots():
        path = root / BINARIES[name]
        if path.exists():
            return path
    pytest.fail(f"agent CLI {name!r} is not installed: run .ci/install", pytrace=False)


def cli_env(launch: Launch, home: Path, *bins: Path) -> dict[str, str]:
    """The whole environment a desk gives the CLI: the launch's, PATH with the CLI's own
    folder first, HOME and LANG; nothing else from the test process."""
    path = os.pathsep.join([*(str(b.parent) for b in bins), "/usr/local/bin", "/usr/bin", "/bin"])
    return {**launch.env, "PATH": path, "HOME": str(home), "LANG": "C.UTF-8"}


def write_files(launch: Launch, home: Path) -> None:
    for path, data in launch.files.items():
        assert home in path.parents, f"{path} is outside HOME"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def start_launch(
    launch: Launch, *, workdir: Path, home: Path, binary: Path
) -> subprocess.Popen[str]:
    """Start the launch in a session of its own (so a test can SIGKILL its whole group)."""
    write_files(launch, home)
    return subprocess.Popen(
        launch.argv,
        cwd=workdir,
        env=cli_env(launch, home, binary),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def run_launch(
    launch: Launch, *, workdir: Path, home: Path, binary: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Write the launch's files and run its argv (argv[0] found on the PATH it sets)."""
    write_files(launch, home)
    return subprocess.run(
        launch.argv,
        cwd=workdir,
        env=cli_env(launch, home, binary),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def work_and_home(root: Path) -> tuple[Path, Path]:
    """A fresh, empty work tree and HOME under ``root`` (emptied when a test reruns a CLI)."""
    work, home = root / "work", root / "home"
    for folder in (work, home):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    return work, home


def profile_launch(
    profile: str,
    *,
    workdir: Path,
    home: Path,
    url: str,
    model: str,
    tools: list[str],
    prompt: str,
    token: str = "t",
    mcp_url: str | None = None,
) -> Launch:
    """``profile``'s launch of its own CLI against the scripted upstream at ``url``."""
    return get_profile(profile).launch(
        command=None,
        workdir=workdir,
        home=home,
        gateway_url=url,
        token=token,
        model=model,
        prompt=prompt,
        tools=tools,
        mcp_url=mcp_url,
    )
