"""Pushes per brief in each durability mode: ``python -m tests.bench.durability``.

One brief at a time, run by ``assay desk run coder --once`` (a real process) on an embedded
forge whose pre-receive hook writes one line per push it receives (the forge's own count;
every ref: the claim, the branch's checkpoints, the settled claim with the review). The
scripted agent desk answers instantly, so in ``window`` mode no window runs out inside a
brief: what is measured is the pushes the mode makes at its fixed points. Lease renewals
are the lease's pushes (one every ``lease / 3`` of running time), not the mode's: the lease
here (300 s) is long enough that none falls inside a brief.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tests.bench.desks import desk_argv, env, make_world
from tests.desks.world import count_pushes

MODES = ("step", "window", "exit")
WINDOW_TARGET = 4  # issue: at most 4 pushes per brief in window mode, whatever the calls


def pushes_per_brief(mode: str, calls: int) -> dict[str, Any]:
    """One brief of ``calls`` model calls (``calls - 1`` file writes, then ``finish``)."""
    with tempfile.TemporaryDirectory(prefix="bench-durability-") as tmp:
        root = Path(tmp)
        forge_path, desks = make_world(root, 1, turns=calls - 1, lease=300)
        manifest = desks / "coder.yaml"
        data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
        manifest.write_text(yaml.safe_dump({**data, "durability": mode}), encoding="utf-8")
        log = count_pushes(forge_path)
        done = subprocess.run(
            desk_argv(forge_path, desks, "--once", "--json"),
            env=env(root / "state"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{mode}, {calls} calls: exit {done.returncode}: {done.stderr}")
        runs = json.loads(done.stdout)["runs"]
        assert runs and runs[0]["code"] == 0, runs
        lines = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
        brief = [refs for refs in lines if any(ref.endswith("/b000") for ref in refs)]
        branch = sum(1 for refs in brief if "refs/heads/assay/b000" in refs)
        return {"mode": mode, "calls": calls, "pushes": len(brief), "branch_pushes": branch}


def measure(*, sizes: tuple[int, ...] = (4, 20)) -> list[dict[str, Any]]:
    return [pushes_per_brief(mode, calls) for calls in sizes for mode in MODES]


def rows(found: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    out = []
    for item in found:
        mode, calls = item["mode"], item["calls"]
        target = {
            "step": "today's behaviour: a push per model call",
            "window": f"target at most {WINDOW_TARGET} whatever the number of calls",
            "exit": "only the end (and waits)",
        }[mode]
        out.append(
            (
                f"durability: pushes per brief, {mode} mode, {calls}-call scripted brief",
                str(item["pushes"]),
                f"{target}; {item['branch_pushes']} of them to the branch, the rest the "
                "claim and the settled claim with the review",
            )
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    found = measure()
    if options.json:
        print(json.dumps(found, indent=2))
    for name, value, note in rows(found):
        print(f"{name}: {value} ({note})")


if __name__ == "__main__":
    main()
