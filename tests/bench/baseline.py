"""Run a benchmark module against another commit, for before/after figures in one run.

``figures(ref, module, args)`` exports ``ref``'s tree (``git archive``) into a temporary
folder, copies this checkout's benchmark module (and ``tests/bench/baseline.py``) over it so
both sides are measured the same way, and runs ``python -m tests.bench.<module> ARGS --json``
there, with that folder first on the path and as the working directory (``python -m`` puts
the working directory before ``PYTHONPATH``). The last JSON object it prints is returned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def export(ref: str, target: Path) -> Path:
    """``ref``'s tree under ``target`` (the object of this repository's history)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref],
        capture_output=True,
        check=True,
    ).stdout
    tar = target / "tree.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as opened:
        opened.extractall(target / "tree", filter="data")
    return target / "tree"


def figures(ref: str, module: str, args: list[str], *, timeout: float = 7200) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="assay-bench-baseline-") as tmp:
        tree = export(ref, Path(tmp))
        for name in (f"{module}.py", "baseline.py"):
            shutil.copy(REPO / "tests" / "bench" / name, tree / "tests" / "bench" / name)
        env = {**os.environ, "PYTHONPATH": str(tree), "NO_COLOR": "1"}
        done = subprocess.run(
            [sys.executable, "-m", f"tests.bench.{module}", *args, "--json"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"{module} at {ref} exited {done.returncode}: {done.stderr[-800:]}")
    start = done.stdout.index("{")
    found: dict[str, Any] = json.JSONDecoder().raw_decode(done.stdout[start:])[0]
    return found
