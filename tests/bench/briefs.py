"""Benchmark: the per-brief and per-step costs of the parts a desk calls on every turn.

Prints figures (not a timed test): parsing and checking a tree of briefs, loading desk
manifests, the agent tools' overhead (write, read, list, and ``run`` of a trivial command
against the same command started directly), the scripted model, and an OpenAI-compatible
round trip to a loopback server (including the adapter's retry wrapper).

    python -m tests.bench.briefs [--briefs N] [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from assay.briefs import load_briefs
from assay.desks import TOOL_NAMES, ToolBox, ToolPolicy, load_desks
from assay.models import build_model
from tests.fakes import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def report(name: str, samples: list[float], unit: str = "ms") -> None:
    scale = 1000.0 if unit == "ms" else 1.0
    median = statistics.median(samples) * scale
    p90 = sorted(samples)[int(len(samples) * 0.9) - 1 if len(samples) > 1 else 0] * scale
    print(f"{name:<48} median {median:8.2f} {unit}   p90 {p90:8.2f} {unit}   n={len(samples)}")


def brief_tree(n: int) -> dict[str, bytes]:
    files = {}
    for i in range(n):
        deps = f"depends_on: [b{i - 1}]\n" if i else ""
        files[f"briefs/b{i}.md"] = (
            f"---\nid: b{i}\ntitle: Brief {i}\nlabels: [python]\npriority: {i % 5}\n{deps}"
            "verify:\n  - {id: unit, run: python -m pytest -q}\n"
            "budget: {steps: 40, usd: 0.5}\n---\nDo the thing.\n"
        ).encode()
    return files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--briefs", type=int, default=500)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args(argv)

    files = brief_tree(args.briefs)
    samples = timed(lambda: load_briefs(files), 5)
    report(f"load_briefs, {args.briefs} briefs (chained deps)", samples)
    print(f"{'':<48} = {args.briefs / statistics.median(samples):,.0f} briefs/s")
    report("load_desks (repository desks/)", timed(lambda: load_desks(REPO / "desks"), 20))

    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch)
        tools = ToolBox(
            tree,
            ToolPolicy(allowed=frozenset(TOOL_NAMES), run_prefixes=((sys.executable, "-c"),)),
        )
        n = args.calls
        report(
            "write_file (1 KB)",
            timed(lambda: tools.call("write_file", {"path": "pkg/a.py", "content": "x" * 1024}), n),
        )
        report("read_file (1 KB)", timed(lambda: tools.call("read_file", {"path": "pkg/a.py"}), n))
        for i in range(200):
            (tree / f"f{i}.txt").write_text("x")
        report("list_files (200 files)", timed(lambda: tools.call("list_files", {}), n))
        command = f"{sys.executable} -c pass"
        through = timed(lambda: tools.call("run", {"command": command}), max(5, n // 5))
        direct = timed(
            lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), max(5, n // 5)
        )
        report("run: python -c pass through ToolBox", through)
        report("run: python -c pass directly", direct)
        overhead = statistics.median(through) - statistics.median(direct)
        print(f"{'':<48} ToolBox overhead {overhead * 1000:.2f} ms")

    model = build_model(
        {"adapter": "scripted", "script": "scripts/example.yaml"}, base_dir=REPO / "desks"
    )
    conversation = [{"role": "user", "content": "go"}]
    report("scripted model call", timed(lambda: model.complete(conversation), n))

    with FakeOpenAIServer([{"content": "ok"}], by="turns") as server:
        http = build_model(
            {"adapter": "openai", "model": "m", "base_url": server.base_url}, base_dir=REPO
        )
        report(
            "openai adapter round trip (loopback)", timed(lambda: http.complete(conversation), n)
        )


if __name__ == "__main__":
    main()
