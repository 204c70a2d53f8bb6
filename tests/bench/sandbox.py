"""Benchmark of the sandbox: ``python -m tests.bench.sandbox [--runs N]``.

What one tool call costs in bubblewrap (namespaces, mounts, the wait for the namespace to
end) against a bare ``subprocess.run`` of the same command, and against the same
``run_sandboxed`` with ``isolation: off`` (the runner's own bookkeeping). Prints figures;
it is not a timed test. ``measure()`` and ``rows()`` feed ``python -m tests.bench``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.sandbox import SandboxSpec, run_sandboxed, sandbox_environment

COMMAND = ["/bin/true"]


def _timed(call: Callable[[], object], runs: int) -> list[float]:
    call()  # warm caches: the first exec of bwrap reads it from disk
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def measure(*, runs: int = 50) -> dict[str, Any]:
    """Median and p90 milliseconds per call for each way of running ``COMMAND``."""
    env = sandbox_environment()
    with tempfile.TemporaryDirectory(prefix="assay-bench-sandbox-") as scratch:
        tree = Path(scratch)

        def bare() -> None:
            subprocess.run(COMMAND, cwd=tree, env=env, check=True)

        def runner(spec: SandboxSpec) -> Callable[[], None]:
            def call() -> None:
                run_sandboxed(
                    COMMAND, cwd=tree, env=env, spec=spec, timeout_s=60, max_output_bytes=64_000
                )

            return call

        ways = {
            "bare subprocess.run": bare,
            "run_sandboxed, isolation off": runner(SandboxSpec(network="host", isolation="off")),
            "run_sandboxed, bubblewrap, network none": runner(SandboxSpec()),
            "run_sandboxed, bubblewrap, network host": runner(SandboxSpec(network="host")),
        }
        found: dict[str, Any] = {"runs": runs}
        for name, call in ways.items():
            times = sorted(_timed(call, runs))
            found[name] = {
                "median_ms": round(statistics.median(times), 2),
                "p90_ms": round(times[int(0.9 * (len(times) - 1))], 2),
            }
    return found


def rows(found: dict[str, Any]) -> list[tuple[str, str, str]]:
    bare = found["bare subprocess.run"]["median_ms"]
    sandboxed = found["run_sandboxed, bubblewrap, network none"]["median_ms"]
    return [
        (
            "sandbox: one tool call in bubblewrap (`/bin/true`, median)",
            f"{sandboxed:.1f} ms",
            f"bare subprocess.run {bare:.1f} ms: +{sandboxed - bare:.1f} ms a call",
        )
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args(argv)
    found = measure(runs=options.runs)
    print(f"{'way of running /bin/true':45} {'median':>9} {'p90':>9}   ({options.runs} runs)")
    for name, value in found.items():
        if isinstance(value, dict):
            print(f"{name:45} {value['median_ms']:>7.2f}ms {value['p90_ms']:>7.2f}ms")


if __name__ == "__main__":
    main()
