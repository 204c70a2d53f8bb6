"""Benchmark of the CLI's start-up: ``python -m tests.bench.startup [--runs N]``.

Prints figures; it is not a timed test. The waker starts ``python -m assay.sweep.wake`` on
every events push and that waker starts ``python -m assay desk run``, so their start-up is
part of the wake latency (and of the time from a desk's last step to its process exiting).
For each command: the median and best wall time of N runs, and the number of modules the
child imported (``-X importtime``), to see which areas a command pulls in.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("-c", "pass"),
    ("-c", "import assay"),
    ("-m", "assay", "--version"),
    ("-m", "assay", "--help"),
    ("-m", "assay", "desk", "run", "--help"),
    ("-m", "assay.sweep.wake", "--help"),
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["NO_COLOR"] = "1"
    return env


def _once(args: tuple[str, ...], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed


def _modules(args: tuple[str, ...], env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:")) - 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=7, help="runs per command (default 7)")
    options = parser.parse_args(argv)
    env = _env()
    print(f"{'command':<40} {'median ms':>10} {'best ms':>9} {'modules':>8}")
    for args in COMMANDS:
        _once(args, env)  # warm the page cache and the bytecode
        times = [_once(args, env) for _ in range(options.runs)]
        label = "python " + " ".join(args)
        print(
            f"{label:<40} {statistics.median(times) * 1000:>10.0f} "
            f"{min(times) * 1000:>9.0f} {_modules(args, env):>8}"
        )


if __name__ == "__main__":
    main()
