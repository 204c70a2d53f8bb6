"""Benchmark: the evidence gate's overhead beyond the rows' own run time.

For a brief with 5 rows, ``verify`` is run on a fresh head several times on a real
embedded forge (a bare repository); the figures separate what the rows themselves took
from what the gate adds: fetching refs, checking out a clean tree, reading the journal,
fingerprinting the environment, and recording evidence (5 commits, one CAS push). The
merge (judging again, and one atomic push) is timed too.

Then, per row kind (a plain command, and pytest, ``node --test``, ``go test``, ``cargo
test``, jest and vitest rows, whose reports the gate reads), what one row costs through
``verify`` beside the same command run bare (``subprocess.run``, the floor): the row's own
time in the gate's sandbox with its reporters, and the gate's overhead around it (the
target: under 100 ms a row); and holdout rows per second (sealed rows opened, placed, run
and recorded), beside bare runs of the same command per second.

    python -m tests.bench.evidence [--runs N] [--row-seconds S] [--kinds]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assay.evidence.gate import merge, verify
from assay.evidence.holdout import HoldoutPublicKey, add_row
from assay.forge import open_forge
from assay.plumbing import Identity
from tests.evidence.gatekit import BRIEF, Scene
from tests.evidence.test_acceptance_set import make_scene
from tests.gatekeys import key_for

ROWS = 5
KIND_ROWS = 10
PYTEST_TEST = "def test_one():\n    assert 1 + 1 == 2\n"
NODE_TEST = "require('node:test')('one', () => { require('node:assert').strictEqual(2, 2); });\n"
GO_FILES = {
    "go.mod": "module example.com/bench\n\ngo 1.19\n",
    "bench_test.go": 'package bench\n\nimport "testing"\n\nfunc TestOne(t *testing.T) {}\n',
}
JS_RUNNERS = Path(sys.executable).parent.parent / "js-runners" / "node_modules" / ".bin"
JEST_TEST = "test('one', () => { expect(1 + 1).toBe(2); });\n"
VITEST_TEST = "import { expect, test } from 'vitest';\n\n" + JEST_TEST
CARGO_FILES = {
    "Cargo.toml": '[package]\nname = "bench"\nversion = "0.1.0"\nedition = "2021"\n',
    "src/lib.rs": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn one() {}\n}\n",
}


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


def _kinds() -> dict[str, tuple[str, dict[str, str]]]:
    """Each row kind: its command and the files it needs (on main: the acceptance set)."""
    node = shutil.which("node") or "node"
    return {
        "plain": (f"{sys.executable} -c pass", {}),
        "pytest": (
            f"{sys.executable} -m pytest -q -p no:cacheprovider test_bench.py",
            {"test_bench.py": PYTEST_TEST},
        ),
        "node:test": (f"{node} --test bench.test.js", {"bench.test.js": NODE_TEST}),
        # Each go row builds in a cold cache (the sandbox's HOME is its own): the bare run,
        # with the user's warm cache, is the floor, not the same work.
        "go": (f"{shutil.which('go') or 'go'} test ./...", GO_FILES),
        "cargo": ("/usr/bin/cargo test --offline -q", CARGO_FILES),  # Debian's (.ci/install)
        # The pinned runners .ci/install puts under .venv/js-runners.
        "jest": (
            f"{JS_RUNNERS / 'jest'} --ci",
            {"package.json": "{}", "bench.test.js": JEST_TEST},
        ),
        "vitest": (
            f"{JS_RUNNERS / 'vitest'} run",
            {"package.json": '{"type": "module"}', "bench.test.js": VITEST_TEST},
        ),
    }


def _brief(commands: Mapping[str, str]) -> str:
    rows = "".join(f"  - id: {row}\n    run: {command}\n" for row, command in commands.items())
    return (
        "---\nid: calc\ntitle: Rows of one kind\nverify:\n"
        + rows
        + 'env: {python: "3", lock: requirements.lock}\n---\nBenchmark brief.\n'
    )


def _bare_seconds(command: str, files: Mapping[str, str], runs: int) -> float:
    """The median wall time of ``command`` run bare, in a folder holding ``files``."""
    with tempfile.TemporaryDirectory(prefix="assay-bench-bare-") as folder:
        for name, text in files.items():
            (Path(folder) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(folder) / name).write_text(text)
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run(shlex.split(command), cwd=folder, capture_output=True, check=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def _verify_seconds(scene: Scene, forge: Any, files: Mapping[str, str], **options: Any) -> Any:
    head = scene.desk_commit(dict(files), claims={f"r{i}": "pass" for i in range(KIND_ROWS)})
    scene.open_review(head)
    started = time.perf_counter()
    report = verify(forge, BRIEF, verifier="gate:bench", **options)
    assert report.passed, report.decision.blocking()
    return time.perf_counter() - started, report


def measure_kinds(*, runs: int = 3) -> dict[str, Any]:
    """Per row kind, one row through ``verify`` beside the bare command; holdout rows/s."""
    found: dict[str, Any] = {"rows": KIND_ROWS, "runs": runs, "kinds": {}}
    with tempfile.TemporaryDirectory(prefix="assay-bench-kinds-") as scratch:
        os.environ["ASSAY_GATE_STATE"] = str(Path(scratch) / "gate-state")  # baselines
        for kind, (command, files) in _kinds().items():
            text = _brief({f"r{i}": command for i in range(KIND_ROWS)})
            scene = make_scene(Path(scratch) / kind.replace(":", "-"), text, files)
            totals, own = [], []
            with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
                for index in range(runs):  # the first also measures main's tests, once
                    total, report = _verify_seconds(
                        scene, forge, {f"work{index}.txt": "x\n"}, insecure=True
                    )
                    totals.append(total / KIND_ROWS)
                    own.append(sum(r.seconds for r in report.ran) / KIND_ROWS)
            per_row, row_own = statistics.median(totals), statistics.median(own)
            found["kinds"][kind] = {
                "bare_s": _bare_seconds(command, files, runs * 3),
                "row_s": row_own,
                "per_row_s": per_row,
                "overhead_s": per_row - row_own,
            }
        found["holdout"] = _holdout_rates(Path(scratch) / "holdout", runs=runs)
    return found


def _holdout_rates(root: Path, *, runs: int) -> dict[str, float]:
    """Holdout rows a second: a brief with ``KIND_ROWS`` sealed rows against the same brief
    with none, on one forge (the difference is what the sealed rows cost)."""
    command = f"{sys.executable} -c pass"
    scene = Scene(root, brief_text=_brief({"r0": command}))
    gate = key_for("bench-gate")
    author = Identity(name="author", email="author@example.invalid")
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        without = [_verify_seconds(scene, forge, {f"a{i}": "x"}, key=gate)[0] for i in range(runs)]
        for row in range(KIND_ROWS):
            add_row(
                forge, BRIEF, f"h{row}", command=command, files={f"h{row}.txt": b"x"},
                public=HoldoutPublicKey.of(gate), author=author,
            )  # fmt: skip
        with_rows = [
            _verify_seconds(scene, forge, {f"b{i}": "x"}, key=gate)[0] for i in range(runs)
        ]
    per_row = (statistics.median(with_rows) - statistics.median(without)) / KIND_ROWS
    return {
        "holdout_rows_per_s": 1 / per_row if per_row > 0 else float("inf"),
        "bare_runs_per_s": 1 / _bare_seconds(command, {}, runs * 3),
    }


def kind_rows(found: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The bench table's rows for ``measure_kinds``."""
    out = []
    for kind, item in found["kinds"].items():
        out.append(
            (
                f"gate: one {kind} row through verify ({found['rows']}-row brief)",
                f"{item['per_row_s'] * 1000:.0f} ms",
                f"bare run {item['bare_s'] * 1000:.0f} ms; the row's own time in the sandbox "
                f"with its reporters {item['row_s'] * 1000:.0f} ms; the gate's overhead "
                f"around it {item['overhead_s'] * 1000:.0f} ms (target under 100 ms)",
            )
        )
    rates = found["holdout"]
    out.append(
        (
            "gate: holdout rows per second",
            f"{rates['holdout_rows_per_s']:.1f}",
            f"bare runs of the same command: {rates['bare_runs_per_s']:.1f} a second",
        )
    )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="verify runs (default 5)")
    parser.add_argument(
        "--row-seconds", type=float, default=0.2, help="each row's own run time (default 0.2)"
    )
    parser.add_argument("--kinds", action="store_true", help="per row kind, and holdout rows/s")
    args = parser.parse_args(argv)
    if args.kinds:
        for name, value, compared in kind_rows(measure_kinds(runs=args.runs)):
            print(f"{name}: {value}\n    {compared}")
        return
    figures = run(args.runs, args.row_seconds)
    print(f"evidence gate: {ROWS}-row brief, {args.runs} verify runs, medians")
    width = max(len(name) for name in figures)
    for name, value in figures.items():
        print(f"  {name:<{width}}  {value * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
