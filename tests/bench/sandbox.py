"""Benchmark of the sandbox: ``python -m tests.bench.sandbox [--runs N]``.

What one tool call costs each way of running it, against a bare ``subprocess.run`` of the
same command (``/bin/true``): a bubblewrap sandbox of its own (``run_sandboxed``, as the
gate's rows and judges run), a call entering a run's ward (``Ward.run``, as the agent's
``run`` tool does: every call after the first), the ward's first call (the sandbox and
its warden built), and the same unsandboxed (``isolation: off``: a warden, bare).

The figure that decides is **CPU time**: each way runs N calls in a child process of its
own under ``perf stat -e task-clock``, which counts every process the child starts, the
ones bubblewrap leaves for init to reap too (``wait4``'s figures miss those), less the
same child with no call; a machine other work shares barely moves it. Wall time (median
and p90 of each call, in the child) is printed beside it and moves with the machine's
load. Without ``perf`` the CPU column falls back to ``wait4`` (and says so). Prints
figures; it is not a timed test. ``measure()`` and ``rows()`` feed ``python -m tests.bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

COMMAND = ["/bin/true"]
ROOT = Path(__file__).resolve().parents[2]
WAYS = {
    "bare": "bare subprocess.run",
    "bubblewrap": "a sandbox of its own (run_sandboxed)",
    "ward": "a call entering the run's ward",
    "ward-first": "the ward's first call (ward built)",
    "off": "unsandboxed (run_sandboxed, isolation off)",
    "off-ward": "unsandboxed, entering the run's ward",
}


def _child(way: str, runs: int) -> None:
    """Run ``runs`` calls one way; print each call's wall milliseconds as JSON."""
    from assay.sandbox import SandboxSpec, run_sandboxed, sandbox_environment
    from assay.sandbox.ward import Ward

    env = sandbox_environment()
    tree = Path(tempfile.mkdtemp(prefix="assay-bench-sandbox-"))
    options: dict[str, Any] = {"env": env, "timeout_s": 60, "max_output_bytes": 64_000}
    off = SandboxSpec(network="host", isolation="off")
    ward = Ward(tree, off if way == "off-ward" else SandboxSpec())
    calls: dict[str, Callable[[], object]] = {
        "bare": lambda: subprocess.run(COMMAND, cwd=tree, env=env, check=True),
        "bubblewrap": lambda: run_sandboxed(COMMAND, cwd=tree, spec=SandboxSpec(), **options),
        "ward": lambda: ward.run(COMMAND, **options),
        "ward-first": lambda: _first_call(tree, options),
        "off": lambda: run_sandboxed(COMMAND, cwd=tree, spec=off, **options),
        "off-ward": lambda: ward.run(COMMAND, **options),
    }
    call = calls[way]
    if way in ("ward", "off-ward"):
        ward.run(COMMAND, **options)  # built before the calls counted, in every child alike
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    ward.close()
    shutil.rmtree(tree, ignore_errors=True)
    print(json.dumps(times))


def _first_call(tree: Path, options: dict[str, Any]) -> None:
    from assay.sandbox import SandboxSpec
    from assay.sandbox.ward import Ward

    with Ward(tree, SandboxSpec()) as ward:
        ward.run(COMMAND, **options)


def _cpu_ms(way: str, runs: int) -> tuple[float, list[float], str]:
    """(CPU milliseconds of a child making ``runs`` calls, their wall times, the counter)."""
    argv = [sys.executable, "-m", "tests.bench.sandbox", "--child", way, "--runs", str(runs)]
    perf = shutil.which("perf")
    if perf:
        done = subprocess.run(
            [perf, "stat", "-x,", "-e", "task-clock", *argv],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        line = [x for x in done.stderr.splitlines() if "task-clock" in x][-1]
        return float(line.split(",")[0]), json.loads(done.stdout), "perf stat task-clock"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return used * 1000, json.loads(done.stdout), "wait4 (perf not installed)"


def measure(*, runs: int = 50) -> dict[str, Any]:
    """CPU milliseconds per call, and the median and p90 of the wall, for each way."""
    found: dict[str, Any] = {"runs": runs}
    for way, name in WAYS.items():
        idle, _, counter = _cpu_ms(way, 0)
        busy, times, counter = _cpu_ms(way, runs)
        times.sort()
        found[name] = {
            "cpu_ms": round((busy - idle) / runs, 2),
            "median_ms": round(statistics.median(times), 2),
            "p90_ms": round(times[int(0.9 * (len(times) - 1))], 2),
        }
        found["counter"] = counter
    found["load"] = [round(x, 1) for x in os.getloadavg()]
    return found


def rows(found: dict[str, Any]) -> list[tuple[str, str, str]]:
    bare = found[WAYS["bare"]]["cpu_ms"]
    own = found[WAYS["bubblewrap"]]["cpu_ms"]
    ward = found[WAYS["ward"]]["cpu_ms"]
    first = found[WAYS["ward-first"]]["cpu_ms"]
    return [
        (
            "sandbox: a tool call entering the run's sandbox (`/bin/true`, CPU)",
            f"{ward:.1f} ms",
            f"bare subprocess.run {bare:.1f} ms: +{ward - bare:.1f} ms a call (target +5); "
            f"the run's first call +{first - bare:.1f} ms",
        ),
        (
            "sandbox: a call in a sandbox of its own (a gate row, CPU)",
            f"{own:.1f} ms",
            f"+{own - bare:.1f} ms a call",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--child", choices=sorted(WAYS), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        _child(options.child, options.runs)
        return
    found = measure(runs=options.runs)
    bare = found[WAYS["bare"]]["cpu_ms"]
    print(f"one call of /bin/true, {options.runs} runs a way; CPU: {found['counter']}; ", end="")
    print(f"load {' '.join(map(str, found['load']))}")
    print()
    print("| way of running `/bin/true` | CPU a call | over bare | wall median | wall p90 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in WAYS.values():
        value = found[name]
        print(
            f"| {name} | {value['cpu_ms']:.2f} ms | +{value['cpu_ms'] - bare:.2f} ms "
            f"| {value['median_ms']:.2f} ms | {value['p90_ms']:.2f} ms |"
        )


if __name__ == "__main__":
    main()
