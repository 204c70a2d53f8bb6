"""Helpers for the sweeper tests on a real embedded forge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from assay.desks.records.events import EventLog
from assay.forge import RefLog, open_forge
from tests.conftest import assay_env

BRIEF = """---
id: {id}
title: {title}
verify:
  - id: unit
    run: python -c "print(1)"
---
A brief for the sweeper tests.
"""

POLICIES = {
    "stuck-claims.yaml": "kind: stuck-claims\nskew_s: 0\n",
    "waker.yaml": "kind: waker\ndispatch: none\n",
    "orphans.yaml": "kind: orphans\n",
    "budgets.yaml": "kind: budgets\n",
    "honest-status.yaml": "kind: honest-status\nskew_s: 0\n",
}


def brief_files(*ids: str) -> dict[str, str]:
    return {f"briefs/{i}.md": BRIEF.format(id=i, title=f"Brief {i}") for i in ids}


def sweepers(directory: Path, **overrides: str) -> Path:
    """A policy folder with zero skew (tests wait for real leases of about a second)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in {**POLICIES, **overrides}.items():
        (directory / name).write_text(text)
    return directory


def refs_of(bare: Path) -> dict[str, str]:
    """Every ref of a bare repository: the whole forge state, to compare before and after."""
    done = subprocess.run(
        ["git", "--git-dir", str(bare), "for-each-ref", "--format=%(refname) %(objectname)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if line)


def start_worker(
    forge: str, brief: str, workdir: Path, *flags: str, lease: float = 1.5
) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "tests.sweep.worker", "--forge", forge, "--brief", brief]
    argv += ["--workdir", str(workdir), "--lease", str(lease), *flags]
    return subprocess.Popen(
        argv,
        cwd=Path(__file__).resolve().parents[2],
        env=assay_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill_group(process: subprocess.Popen[str]) -> None:
    """SIGKILL a process started in its own session (and only its own children)."""
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)


def push_event(forge_spec: str, brief: str, kind: str, event_id: str) -> None:
    """Append one event to ``refs/assay/events/<brief>`` with the desk's ``EventLog``."""
    with open_forge(forge_spec) as forge:
        EventLog(forge, brief).append(kind, actor="reviewer", event_id=event_id)


def status_record(forge_spec: str, brief: str) -> dict[str, Any] | None:
    with open_forge(forge_spec) as forge:
        return RefLog.for_brief(forge, "status", brief).latest()


def sweep_json(run_assay: Any, *args: str) -> dict[str, Any]:
    done = run_assay("sweep", "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def env() -> dict[str, str]:
    return assay_env()
