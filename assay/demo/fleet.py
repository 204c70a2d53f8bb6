"""The demo's desk processes: real ``assay desk run`` children, started, watched and killed.

Each process gets its own state folder (work trees and forge cache), its own holder token
(so the demo can tell which process holds which claim) and a log file. The environment
every child shares is built once: the interpreter's folder first on ``PATH`` (so verify rows
that say ``python`` run this interpreter), short claim skew, and the model-call log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from assay.models.scripted import CALL_LOG_ENV

DESK_NAME = "demo"
CLAIM_SKEW_S = "1.5"


def child_environment(directory: Path) -> dict[str, str]:
    """The environment of every process the demo starts."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env["ASSAY_CLAIM_SKEW"] = CLAIM_SKEW_S
    env[CALL_LOG_ENV] = str(directory / "model-calls.jsonl")
    env["ASSAY_STATE"] = str(directory / "state" / "wakers")
    env["NO_COLOR"] = "1"
    env.pop("ASSAY_FORGE", None)
    return env


@dataclass
class DeskProcess:
    """One ``assay desk run`` child and what the demo knows of it."""

    name: str
    holder: str
    process: subprocess.Popen[bytes]
    started: float
    workroot: Path
    killed: bool = False
    exit_code: int | None = None

    def poll(self) -> int | None:
        if self.exit_code is None:
            self.exit_code = self.process.poll()
        return self.exit_code

    @property
    def alive(self) -> bool:
        return self.poll() is None

    def kill(self) -> None:
        """SIGKILL the desk and everything it started (its own process group)."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.poll()


@dataclass
class Fleet:
    """Every desk process the demo started, in order."""

    directory: Path
    forge_url: str
    env: dict[str, str]
    processes: list[DeskProcess] = field(default_factory=list)
    # One work root for every process, as on one machine (a ``--cli`` demo: a CLI writes
    # its work tree's path into its prompts, so a run resumes only on the same path).
    shared_workroot: Path | None = None

    def start(self, *, brief: str | None = None) -> DeskProcess:
        """Start one more desk process (on one brief with ``--once`` when ``brief`` is set)."""
        number = len(self.processes) + 1
        name = f"desk-{number}"
        state = self.directory / "state" / name
        holder = f"{name}-{os.getpid()}"
        argv = [
            sys.executable,
            "-m",
            "assay",
            "desk",
            "run",
            DESK_NAME,
            "--forge",
            self.forge_url,
            "--desks",
            str(self.directory / "desks"),
            "--holder",
            holder,
            "--workdir",
            str(self.shared_workroot or state / "work"),
            "--cache",
            str(state / "cache"),
            "--json",
        ]
        if brief is not None:
            argv += ["--brief", brief, "--once"]
        logs = self.directory / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{name}.log", "wb") as log:
            process = subprocess.Popen(
                argv,
                cwd=self.directory,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        desk = DeskProcess(
            name, holder, process, time.monotonic(), self.shared_workroot or state / "work"
        )
        self.processes.append(desk)
        return desk

    def holding(self, holder: str) -> DeskProcess | None:
        """The process whose holder token is ``holder``."""
        return next((desk for desk in self.processes if desk.holder == holder), None)

    @property
    def running(self) -> list[DeskProcess]:
        return [desk for desk in self.processes if desk.alive]

    def stop_all(self) -> None:
        for desk in self.running:
            desk.kill()
