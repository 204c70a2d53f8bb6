"""Benchmark: the record tests themselves, on the in-memory backend beside the git forge.

The records layer's logic tests take a ``backend`` and run once on each
(``tests.forge_fixtures.backend``): the codec-free record log, the writer's lost-race policy,
the claim rules, events, reviews, evidence chains, a sweep's batch and the read model's
rows. This runs those tests, one backend at a time, each in its own ``pytest`` process,
and reports for each the tests' own time (the sum of their call and fixture times, from
pytest's report: start-up is the same for both and left out), the process's wall time and
its peak resident memory. ``python -m tests.bench.records``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The record tests that run on both backends.
FILES = (
    "tests/forge/test_record_backends.py",
    "tests/forge/test_logic_backends.py",
    "tests/claims/test_store.py",
)


PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]


def _variants(backend: str) -> list[str]:
    """The node ids of the record tests' ``backend`` variants (``...[memory]``)."""
    listed = subprocess.run(
        [*PYTEST, "--collect-only", *FILES],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [node for node in listed if "::" in node and f"[{backend}" in node]


def _run(backend: str) -> dict[str, float]:
    """The ``backend`` variants of the record tests in one pytest process."""
    with tempfile.TemporaryDirectory(prefix="assay-bench-records-") as scratch:
        report = Path(scratch) / "report.xml"
        argv = [*PYTEST, f"--junitxml={report}", *_variants(backend)]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        started = time.perf_counter()
        child = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise RuntimeError(f"the {backend} record tests failed (exit {child.returncode})")
        cases = ET.parse(report).getroot().iter("testcase")
        timings = [float(case.get("time", 0)) for case in cases]
    return {
        "tests": len(timings),
        "tests_s": sum(timings),
        "wall_s": wall,
        "peak_mb": usage.ru_maxrss / 1024,
    }


def measure() -> dict[str, dict[str, float]]:
    return {backend: _run(backend) for backend in ("memory", "git")}


def rows(found: dict[str, dict[str, float]]) -> list[tuple[str, str, str]]:
    memory, git = found["memory"], found["git"]
    return [
        (
            f"records: the {int(memory['tests'])} record tests on the in-memory backend",
            f"{memory['tests_s'] * 1000:.0f} ms in the tests, {memory['peak_mb']:.0f} MB peak",
            f"the git forge: {git['tests_s'] * 1000:.0f} ms "
            f"({git['tests_s'] / max(memory['tests_s'], 1e-9):.1f}x), "
            f"{git['peak_mb']:.0f} MB peak; wall {memory['wall_s']:.1f} s / {git['wall_s']:.1f} s",
        )
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.parse_args(argv)
    for name, value, compared in rows(measure()):
        print(f"{name}: {value}; {compared}")


if __name__ == "__main__":
    main()
