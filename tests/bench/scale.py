"""Scale benchmark: ``python -m tests.bench.scale [--briefs N] [--desks N] [--quick]``.

N briefs (default 500) and N desk processes (default 20) on one embedded forge served over
smart HTTP (``assay forge serve``), with the scripted model (each brief: four model calls,
three tool steps, a review, the claim done). Prints the total time, briefs per minute,
claim conflicts (acquire attempts that lost a race and moved on), double claims (must be
0), repaid model calls (must be 0), and the peak memory of the desk processes (from
``wait4``'s rusage of each child). Every invariant is checked from the forge afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.torture.fleet import Fleet, invariant_problems


def measure(*, briefs: int, desks: int, keep: bool = False) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="assay-bench-scale-"))
    problems: list[str] = []
    fleet = Fleet(root, [f"s{i:04d}" for i in range(briefs)], lease=120)
    try:
        fleet.setup()
        fleet.serve()
        started = time.monotonic()
        for _ in range(desks):
            fleet.start_desk()
        fleet.wait_all(timeout=3600)
        total = time.monotonic() - started
        results = fleet.inspect()
        problems = invariant_problems(fleet, results)
        runs = Counter(run["brief"] for desk in fleet.desks for run in fleet.runs(desk))
        stats = fleet.stats()
        rss = [d.maxrss_kb for d in fleet.desks]
        hwm = [d.hwm_kb for d in fleet.desks if d.hwm_kb]
        return {
            "briefs": briefs,
            "desks": desks,
            "total_s": total,
            "briefs_per_min": briefs / total * 60,
            "load_average": os.getloadavg(),  # at the end of the run: 1, 5, 15 minutes
            "finished": sum(
                r.claim_state == "done" and r.review == "ready" for r in results.values()
            ),
            "claim_attempts": stats["acquire_calls"],
            "claim_conflicts": stats["acquire_busy"],
            "double_claims": sum(n > 1 for n in runs.values())
            + sum(r.starts > 1 or not r.fences_monotonic for r in results.values()),
            "takeovers": sum(r.fence > 1 for r in results.values()),
            "repaid_model_calls": sum(
                max(r.model_ok - fleet.model_answers(), 0) + r.model_positions_repeated
                for r in results.values()
            ),
            "desk_exit_codes": dict(Counter(str(d.code) for d in fleet.desks)),
            "peak_rss_mb_max": max(rss) / 1024,
            "peak_rss_mb_median": statistics.median(rss) / 1024,
            "desk_python_hwm_mb_max": max(hwm, default=0) / 1024,
            "desk_python_hwm_mb_median": statistics.median(hwm or [0]) / 1024,
            "problems": problems[:10],
            # A broken promise keeps the fleet's folder (desk logs, caches, the forge).
            "kept": str(root) if keep or problems else "",
        }
    finally:
        fleet.stop()
        if not keep and not problems:
            shutil.rmtree(root, ignore_errors=True)


def rows(f: dict[str, Any]) -> list[tuple[str, str, str]]:
    label = f"scale {f['briefs']} briefs x {f['desks']} desks"
    return [
        (f"{label}: total time", f"{f['total_s']:.1f} s", f"{f['finished']} finished"),
        (
            f"{label}: briefs per minute",
            f"{f['briefs_per_min']:.1f}",
            "smart HTTP, scripted model; load {:.1f} {:.1f} {:.1f}".format(*f["load_average"]),
        ),
        (
            f"{label}: claim conflicts",
            str(f["claim_conflicts"]),
            f"of {f['claim_attempts']} acquire attempts",
        ),
        (
            f"{label}: double claims",
            str(f["double_claims"]),
            f"must be 0 ({f['takeovers']} briefs changed holder after a lapsed lease)",
        ),
        (f"{label}: repaid model calls", str(f["repaid_model_calls"]), "must be 0"),
        (
            f"{label}: peak memory per desk",
            f"{f['desk_python_hwm_mb_max']:.0f} MB",
            f"max VmHWM of a desk process; median {f['desk_python_hwm_mb_median']:.0f} MB; "
            f"largest child incl. git: {f['peak_rss_mb_max']:.0f} MB (wait4)",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--briefs", type=int, default=None, help="briefs (default 500)")
    parser.add_argument("--desks", type=int, default=None, help="desk processes (default 20)")
    parser.add_argument("--quick", action="store_true", help="40 briefs, 4 desks")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    options = parser.parse_args(argv)
    briefs = options.briefs or (40 if options.quick else 500)
    desks = options.desks or (4 if options.quick else 20)
    figures = measure(briefs=briefs, desks=desks)
    if options.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value, note in rows(figures):
            print(f"{name:<52} {value:>12}  {note}")
        for problem in figures["problems"]:
            print(f"  problem: {problem}")
        if figures["kept"]:
            print(f"  the fleet's folder is kept: {figures['kept']}")
    if figures["problems"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
