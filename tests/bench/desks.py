"""Desk loop benchmark: ``python -m tests.bench.desks`` prints figures (not a timed test).

* throughput: briefs per minute for 1, 4 and 8 desk processes (``assay desk run``) on an
  embedded forge, each brief two scripted model turns (write a file, finish);
* recovery: time from a SIGKILL to the run resumed by another process on another cache,
  excluding the lease wait (measured from the moment the lease expired to the resumed
  process's first push to the brief's branch);
* journaling overhead: one brief of N turns in process, each model call taking 200 ms;
  the share of the wall time that is not the model (journal lines, fsyncs, commits and
  CAS pushes of every durability point, claim and review writes).

Default is short (8 briefs, one recovery sample); ``--briefs 50 --samples 5`` is the
full run the docs quote.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from assay.claims import ClaimStore
from assay.desks import load_desks
from assay.desks.host.loop import DeskLoop
from assay.forge import init_forge, open_forge
from assay.plumbing import ASSAY_IDENTITY, RefUpdate

REPO = Path(__file__).resolve().parents[2]


def env(state: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "ASSAY_STATE": str(state),
        "ASSAY_CLAIM_SKEW": "0",
        "NO_COLOR": "1",
    }


def make_world(
    root: Path, briefs: int, *, delay_s: float = 0.0, turns: int = 1, lease: float = 30
) -> tuple[Path, Path]:
    forge_path = init_forge(root / "forge.git")
    with open_forge(str(forge_path), cache_dir=root / "setup-cache") as forge:
        tip = forge.fetch("refs/heads/main")["refs/heads/main"]
        files = {n: forge.read_blob(tip, n) or b"" for n in forge.list_tree(tip, "")}
        for i in range(briefs):
            front = {"id": f"b{i:03d}", "title": f"Brief {i}", "priority": i % 3}
            files[f"briefs/b{i:03d}.md"] = f"---\n{yaml.safe_dump(front)}---\nWork.\n".encode()
        commit = forge.commit(
            files,
            parents=[tip],
            message="bench briefs",
            author=ASSAY_IDENTITY,
        )
        assert forge.push([RefUpdate("refs/heads/main", commit, expected=tip)]).ok
    desks = root / "desks"
    (desks / "scripts").mkdir(parents=True)
    responses: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": f"f{t}.txt", "content": "x\n"}}
            ]
        }
        for t in range(turns)
    ]
    responses.append({"tool_calls": [{"name": "finish", "arguments": {"summary": "ok"}}]})
    (desks / "scripts" / "coder.json").write_text(json.dumps({"responses": responses}))
    manifest = {
        "name": "coder",
        "kind": "agent",
        "takes": {"globs": ["*"]},
        "lease": lease,
        "model": {"adapter": "scripted", "script": "scripts/coder.json", "delay_s": delay_s},
        "tools": ["write_file", "finish"],
    }
    (desks / "coder.yaml").write_text(yaml.safe_dump(manifest))
    return forge_path, desks


def desk_argv(forge_path: Path, desks: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "assay",
        "desk",
        "run",
        "coder",
        "--forge",
        str(forge_path),
        "--desks",
        str(desks),
        *extra,
    ]


def throughput(n_desks: int, n_briefs: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-desks-") as tmp:
        root = Path(tmp)
        forge_path, desks = make_world(root, n_briefs)
        started = time.monotonic()
        procs = [
            subprocess.Popen(
                desk_argv(forge_path, desks, "--json"),
                env=env(root / f"m{i}"),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for i in range(n_desks)
        ]
        done = 0
        for proc in procs:
            out, _ = proc.communicate(timeout=1800)
            done += sum(1 for r in json.loads(out)["runs"] if r["code"] == 0)
        wall = time.monotonic() - started
        assert done == n_briefs, f"{done} of {n_briefs} briefs done"
        return n_briefs / wall * 60


def recovery() -> tuple[float, float]:
    """(seconds from lease expiry to the resumed run's first push, kill to that push)."""
    with tempfile.TemporaryDirectory(prefix="bench-desks-") as tmp:
        root = Path(tmp)
        forge_path, desks = make_world(root, 1, delay_s=30, lease=2)
        first = subprocess.Popen(
            desk_argv(forge_path, desks, "--once"),
            env=env(root / "a"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        ref = "refs/heads/assay/b000"
        with open_forge(str(forge_path), cache_dir=root / "probe") as forge:
            store = ClaimStore(forge, skew_s=0)
            while not forge.fetch(ref).get(ref):  # the first model call is under way
                time.sleep(0.02)
            tip = forge.fetch(ref)[ref]
            killed = time.monotonic()
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
            while True:
                record = store.get("b000")
                if record is not None and store.status(record) == "expired":
                    break
                time.sleep(0.02)
            expired = time.monotonic()
            fast = yaml.safe_load((desks / "coder.yaml").read_text())
            fast["model"]["delay_s"] = 0
            (desks / "coder.yaml").write_text(yaml.safe_dump(fast))
            second = subprocess.Popen(
                desk_argv(forge_path, desks, "--once"),
                env=env(root / "b"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            while forge.fetch(ref).get(ref) == tip:
                time.sleep(0.01)
            resumed = time.monotonic()
            second.wait(timeout=300)
        return resumed - expired, resumed - killed


def overhead(turns: int, model_s: float = 0.2) -> tuple[float, float]:
    """(wall seconds per model call, share of the wall time not spent in the model)."""
    with tempfile.TemporaryDirectory(prefix="bench-desks-") as tmp:
        root = Path(tmp)
        forge_path, desks = make_world(root, 1, delay_s=model_s, turns=turns)
        with open_forge(str(forge_path), cache_dir=root / "cache") as forge:
            loop = DeskLoop(
                forge=forge,
                desk=load_desks(desks)["coder"],
                desks_dir=desks,
                workroot=root / "work",
                skew_s=0,
            )
            started = time.monotonic()
            [report] = loop.run(once=True)
            wall = time.monotonic() - started
        assert report.code == 0, report
        calls = turns + 1
        return wall / calls, 1 - (calls * model_s) / wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--briefs", type=int, default=8)
    parser.add_argument("--desks", type=int, nargs="*", default=[1, 4, 8])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--samples", type=int, default=1, help="recovery samples")
    args = parser.parse_args(argv)
    print(f"## Desk loop (scripted model, embedded forge over file://, {args.briefs} briefs)")
    print("| desks | briefs per minute |")
    print("| --- | ---: |")
    for n in args.desks:
        print(f"| {n} | {throughput(n, args.briefs):.1f} |", flush=True)
    samples = [recovery() for _ in range(args.samples)]
    resume = statistics.median(s[0] for s in samples)
    total = statistics.median(s[1] for s in samples)
    print(
        f"\nSIGKILL to resumed on another process: {resume:.2f} s excluding the lease wait "
        f"({total:.2f} s including a 2 s lease), median of {args.samples}"
    )
    per_call, share = overhead(args.turns)
    print(
        f"\nJournaling overhead with a 200 ms model: {per_call * 1000:.0f} ms per model call "
        f"(with its tool step), {share:.0%} of the wall time outside the model"
    )


if __name__ == "__main__":
    main()
