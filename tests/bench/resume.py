"""A killed agent CLI resumed natively against relaunched and replayed:
``python -m tests.bench.resume [--calls N] [--cli claude-code]``.

Prints figures; it is not a timed test. A ``kind: cli`` desk runs a real CLI (as
``.ci/install`` installs it) through ``assay desk run`` on a local embedded forge, against
the scripted upstream, through a session of N tool calls (each appends a line to a file no
checkpoint holds). The desk is SIGKILLed while call N is in flight upstream, and a new
process (the same ``--holder``: it takes the brief back at once) resumes the run, once per
method, each on a brief of its own:

- native (the profile's own): the CLI resumes its session from the checkpoint's session
  state; the call in flight goes upstream again;
- relaunch (``cli.resume: relaunch``): the CLI starts again from the beginning, its N
  recorded calls answered from the journal and its tools run again, then the call in
  flight goes upstream again.

Side by side: seconds from the resuming process's start to the next request reaching the
upstream (the one that was in flight), the tools that ran again, and requests sent upstream
again. The relaunch brief's tools print the same thing every run, so its replay matches.
The floor: the same CLI started on its own (no desk, no sandbox) against the same upstream,
to its first request.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from assay.agentcli.profiles import get_profile
from assay.demo.upstream import Seen, WireFake
from assay.forge import init_forge
from tests.agentcli.clis import cli_env, write_files
from tests.bench.clidesk import CLIS, cli_path
from tests.desks.world import World, brief_text
from tests.forge_fixtures import put_on_main

KEY = "sk-bench-resume-upstream-key-3c8e"
METHODS = ("native", "relaunch")


@dataclass(frozen=True)
class Resumed:
    """One method's resume of an N-call session killed with call N in flight."""

    method: str
    calls: int
    to_next_call_s: float  # the resuming process's start to the upstream's next request
    total_s: float  # ... to its exit, the session done
    tools_again: int  # tool calls that ran a second time
    requests_again: int  # conversation requests the upstream received twice


class Timed(WireFake):
    """The scripted upstream, noting when each conversation request arrives."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        super().__init__(script)
        self.arrived: list[tuple[int | None, float]] = []

    def on_request(self, seen: Seen) -> None:
        self.arrived.append((seen.turn, time.monotonic()))


def session(cli: str, calls: int) -> list[dict[str, Any]]:
    tool = CLIS[cli].tools[0]
    key = "cmd" if tool == "exec_command" else "command"
    extra = {"description": "log"} if tool == "Bash" else {}
    turns = [
        {"tool_calls": [{"name": tool, "arguments": {key: f"echo {i} >> runs.log", **extra}}]}
        for i in range(calls)
    ]
    return [*turns, {"content": "Logged."}]


def resume_once(root: Path, cli: str, calls: int, method: str) -> Resumed:
    chosen = CLIS[cli]
    world = World(root, init_forge(root / "forge.git"))
    put_on_main(world.forge_path, {".gitignore": "runs.log\n"})
    world.add_briefs(brief_text("long", body="Log every step."))
    clis = str(cli_path(chosen.binary).parent)
    env = {"BENCH_UPSTREAM_KEY": KEY, "PATH": os.pathsep.join([clis, os.environ["PATH"]])}
    script = session(cli, calls)
    with Timed(script) as fake:
        base_url = fake.url if chosen.model["adapter"] == "anthropic" else fake.openai_base_url
        manifest = {
            "name": "bench",
            "kind": "cli",
            "takes": {"globs": ["*"]},
            "cli": {"profile": chosen.profile, "resume": method},
            "model": {**chosen.model, "base_url": base_url, "api_key_env": "BENCH_UPSTREAM_KEY"},
            "tools": list(chosen.tools),
            "lease": "30s",
            "sandbox": {"toolchains": ["python", "node"]},
        }
        (world.desks / "bench.yaml").write_text(yaml.safe_dump(manifest))
        args = world.desk_args("bench", "--holder", "box", "--once", "--brief", "long")
        fake.hold(at_turn=calls)
        first = world.start(*args, extra=env)
        try:
            fake.wait_for_in_flight(1, timeout=60 + calls * 5.0)
        finally:
            world.kill(first)
            fake.release()
        before = len(fake.arrived)
        started = time.monotonic()
        done = world.start(*args, extra=env)
        _, err = done.communicate(timeout=120 + calls * 5.0)
        ended = time.monotonic()
        if done.returncode != 0:
            raise SystemExit(f"the {method} resume exited {done.returncode}:\n{err[-2000:]}")
        after = fake.arrived[before:]
    lines = (root / "machine-a" / "work" / "bench" / "long" / "runs.log").read_text().split()
    turns = [turn for turn, _ in fake.arrived]
    return Resumed(
        method=method,
        calls=calls,
        to_next_call_s=after[0][1] - started,
        total_s=ended - started,
        tools_again=len(lines) - len(set(lines)),
        requests_again=len(turns) - len(set(turns)),
    )


def cli_alone(root: Path, cli: str) -> float:
    """Seconds from starting the CLI on its own to its first request reaching the upstream."""
    chosen = CLIS[cli]
    work, home = root / "work", root / "home"
    work.mkdir(parents=True)
    home.mkdir()
    with Timed(session(cli, 1)) as fake:
        launch = get_profile(chosen.profile).launch(
            command=None,
            workdir=work,
            home=home,
            gateway_url=fake.url,
            token=KEY,
            model=str(chosen.model["model"]),
            prompt="Log every step.",
            tools=chosen.tools,
            mcp_url=None,
        )
        write_files(launch, home)
        started = time.monotonic()
        subprocess.run(
            launch.argv,
            cwd=work,
            env=cli_env(launch, home, cli_path(chosen.binary)),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
            check=True,
        )
        return fake.arrived[0][1] - started


def measure(*, cli: str = "claude-code", calls: int = 100) -> list[Resumed]:
    found = []
    for method in METHODS:
        root = Path(tempfile.mkdtemp(prefix=f"assay-bench-resume-{method}-"))
        try:
            found.append(resume_once(root, cli, calls, method))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix="assay-bench-resume-alone-"))
    try:
        alone = cli_alone(root, cli)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    found.append(Resumed("alone", calls, alone, alone, 0, 0))
    return found


def rows(found: list[Resumed], cli: str) -> list[tuple[str, str, str]]:
    """(measure, value, note) rows for ``python -m tests.bench``."""
    native, relaunch, alone = (next(r for r in found if r.method == m) for m in (*METHODS, "alone"))
    n = native.calls
    return [
        (
            f"resume ({cli}, {n}-call session): seconds to the next new call, native",
            f"{native.to_next_call_s:.2f}",
            f"relaunch and replay: {relaunch.to_next_call_s:.2f} "
            f"({relaunch.to_next_call_s / native.to_next_call_s:.1f}x); the resuming process's "
            "start to the upstream's next request (the one in flight at the kill); the CLI "
            f"alone, started to its first request: {alone.to_next_call_s:.2f}",
        ),
        (
            f"resume ({cli}, {n}-call session): tools run again, native",
            str(native.tools_again),
            f"relaunch and replay: {relaunch.tools_again} (every tool of the session)",
        ),
        (
            f"resume ({cli}, {n}-call session): requests sent upstream again, native",
            str(native.requests_again),
            f"relaunch and replay: {relaunch.requests_again}; the call in flight at the kill",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="calls before the kill")
    parser.add_argument("--cli", choices=sorted(CLIS), default="claude-code")
    options = parser.parse_args(argv)
    if options.calls < 2:
        parser.error("--calls must be at least 2")
    found = measure(cli=options.cli, calls=options.calls)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"resume of a {options.calls}-call {options.cli} session (load {load})")
    print()
    print(
        "| method | to the next new call (s) | resume to exit (s) | tools again | requests again |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in found:
        if r.method == "alone":
            print(f"| the CLI alone, to its first request | {r.to_next_call_s:.2f} | | | |")
            continue
        print(
            f"| {r.method} | {r.to_next_call_s:.2f} | {r.total_s:.2f} | {r.tools_again} "
            f"| {r.requests_again} |"
        )


if __name__ == "__main__":
    main()
