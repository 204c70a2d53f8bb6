"""Benchmark: the evidence gate's overhead beyond the rows' own run time.

For a brief with 5 rows, ``verify`` is run on a fresh head several times on a real
embedded forge (a bare repository); the figures separate what the rows themselves took
from what the gate adds: fetching refs, checking out a clean tree, reading the journal,
fingerprinting the environment, and recording evidence (5 commits, one CAS push). The
merge (judging again, and one atomic push) is timed too.

    python -m tests.bench.evidence [--runs N] [--row-seconds S]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from assay.evidence.gate import merge, verify
from assay.forge import open_forge
from tests.evidence.gatekit import BRIEF, Scene

ROWS = 5


def brief_text(row_seconds: float) -> str:
    rows = "".join(
        f'  - id: row{i}\n    run: python3 -c "import time; time.sleep({row_seconds})"\n'
        for i in range(ROWS)
    )
    return (
        "---\nid: calc\ntitle: Five rows\nverify:\n"
        + rows
        + 'env: {python: "3", lock: requirements.lock}\n---\nBenchmark brief.\n'
    )


def run(runs: int, row_seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="assay-bench-evidence-") as scratch:
        scene = Scene(Path(scratch), brief_text=brief_text(row_seconds))
        totals: list[float] = []
        rows: list[float] = []
        parts: dict[str, list[float]] = {}
        with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
            for index in range(runs):
                head = scene.desk_commit(
                    {f"work{index}.txt": "x\n"},
                    claims={f"row{i}": "pass" for i in range(ROWS)},
                )
                scene.open_review(head)
                started = time.perf_counter()
                report = verify(forge, BRIEF, verifier="gate:bench")
                totals.append(time.perf_counter() - started)
                assert report.passed, report.decision.blocking()
                rows.append(sum(record.seconds for record in report.ran))
                for name, value in report.timings.items():
                    parts.setdefault(name, []).append(value)
            started = time.perf_counter()
            merge(forge, BRIEF)
            merge_s = time.perf_counter() - started
    overhead = [t - r for t, r in zip(totals, rows, strict=True)]
    figures = {
        "verify_total_s": statistics.median(totals),
        "rows_own_s": statistics.median(rows),
        "overhead_s": statistics.median(overhead),
        "overhead_per_row_s": statistics.median(overhead) / ROWS,
        "merge_s": merge_s,
    }
    for name in ("fetch", "checkout", "fingerprint", "record", "review"):
        if name in parts:
            figures[f"{name}_s"] = statistics.median(parts[name])
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="verify runs (default 5)")
    parser.add_argument(
        "--row-seconds", type=float, default=0.2, help="each row's own run time (default 0.2)"
    )
    args = parser.parse_args(argv)
    figures = run(args.runs, args.row_seconds)
    print(f"evidence gate: {ROWS}-row brief, {args.runs} verify runs, medians")
    width = max(len(name) for name in figures)
    for name, value in figures.items():
        print(f"  {name:<{width}}  {value * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
