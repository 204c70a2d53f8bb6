"""Dispatching a woken run: a local ``assay desk run DESK --brief ID --once`` process.

On the embedded forge the waker starts the desk as a detached local process (on GitHub the
same decision becomes a ``workflow_dispatch``). The brief id is checked and passed as one
argv element; no shell is involved. The child's output goes to a log file, so the sweep
(or the receive hook) that started it returns at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from assay.ids import check_id
from assay.plumbing import without_git_vars

ASSAY_ROOT = Path(__file__).resolve().parents[2]


def desk_argv(
    brief: str,
    desk: str,
    forge_url: str,
    *,
    desks_dir: str | None = None,
    python: str | None = None,
) -> list[str]:
    """The command line the waker runs for ``brief`` (held by ``desk``)."""
    argv = [python or sys.executable, "-m", "assay", "desk", "run"]
    argv += [check_id(desk, what="desk name"), "--brief", check_id(brief), "--once"]
    argv += ["--forge", forge_url]
    if desks_dir:
        argv += ["--desks", desks_dir]
    return argv


def dispatch_local(
    brief: str,
    desk: str,
    forge_url: str,
    *,
    log_dir: Path,
    desks_dir: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start the desk for ``brief`` detached, its output appended to a log in ``log_dir``."""
    env = without_git_vars()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ASSAY_ROOT), env.get("PYTHONPATH")]))
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"wake-{check_id(brief)}.log", "ab") as log:
        process = subprocess.Popen(
            desk_argv(brief, desk, forge_url, desks_dir=desks_dir),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
    return process
