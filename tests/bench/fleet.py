"""A fleet on GitHub's budget: ``python -m tests.bench.fleet [--minutes 5] [--compress 4]``.

Twenty desks on one host (four ``assay desk run`` processes of five slots: one push ledger,
one group) work issue briefs of the fake GitHub of ``tests/github`` (real HTTP, real
smart-HTTP git) for ``--minutes`` simulated minutes. Each brief is a scripted 40-call
conversation answered in about 2 s a call, in ``window`` durability (GitHub's default: a
30 s window) with GitHub's default lease (5 minutes). The fake keeps GitHub's limits: 6
pushes a minute per repository (a push over it refused, 429), 80 content-creating requests
a minute.

Time is compressed ``--compress`` times through the one setting the fake and the client
both read (``ASSAY_FORGE_BUDGET_WINDOW_SECONDS``: the budget's minute), and every other
duration with it (the calls, the window, the lease, the run), so five minutes take 75 s
at 4x. Figures are given in simulated minutes: pushes in every minute of the run (the
fake's own log), REST writes a minute, briefs finished an hour, and the CPU-seconds the
desk processes spent per brief finished. Two cores run it, shared with whatever else
runs: compression is only free while the desks' own CPU is not the limit (a brief's
calls then take longer than their simulated 2 s, and fewer briefs finish).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

PROCESSES, SLOTS = 4, 5
CALLS = 40
CALL_S = 2.0  # simulated seconds a call
WINDOW_S, LEASE_S, MINUTE_S = 30.0, 300.0, 60.0  # GitHub's defaults, simulated
TARGETS = {"pushes_per_minute": 6, "writes_per_minute": 80, "briefs_per_hour": 100}
BODY = "---\nverify:\n  - id: unit\n    run: python -c \"print('ok')\"\n---\nWrite the files.\n"


def _desk(desks: Path, compress: float) -> None:
    (desks / "scripts").mkdir(parents=True)
    delay = CALL_S / compress
    steps = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": f"f{n}.txt", "content": f"{n}\n"}}
            ],
            "delay_s": delay,
        }
        for n in range(CALLS - 1)
    ]
    done = {
        "tool_calls": [
            {
                "name": "finish",
                "arguments": {"summary": "ok", "evidence": [{"row": "unit", "result": "pass"}]},
            }
        ],
        "delay_s": delay,
    }
    (desks / "scripts" / "coder.json").write_text(json.dumps({"responses": [*steps, done]}))
    manifest = {
        "name": "coder",
        "kind": "agent",
        "takes": {"globs": ["*"]},
        "model": {"adapter": "scripted", "script": "scripts/coder.json"},
        "tools": ["write_file", "finish"],
        "lease": LEASE_S / compress,
        "durability": "window",
        "checkpoint_window": f"{WINDOW_S / compress}s",
        "concurrency": SLOTS,
    }
    (desks / "coder.yaml").write_text(yaml.safe_dump(manifest))


def measure(*, minutes: float = 5.0, compress: float = 4.0) -> dict[str, Any]:
    from assay.claims import ClaimStore
    from assay.forge import open_forge
    from assay.forge.budget import WINDOW_ENV, PushBudget
    from tests.conftest import assay_argv, assay_env
    from tests.github.fake_github import BOT, FakeGitHub, Limits

    minute = MINUTE_S / compress
    run_s = minutes * minute
    # Enough briefs that no desk runs dry: each takes at least CALLS calls.
    briefs = PROCESSES * SLOTS * (math.ceil(minutes * MINUTE_S / (CALLS * CALL_S)) + 1)
    with tempfile.TemporaryDirectory(prefix="assay-bench-fleet-") as tmp:
        root = Path(tmp)
        # The briefs are filed and accepted quickly (the people's issues and the events
        # job are not what is measured); GitHub's limits apply from the fleet's start.
        limits = Limits(push_window_s=0.05, creates_per_minute=10**6, creates_per_hour=10**6)
        with FakeGitHub(root / "github", limits=limits, rate_limit=1_000_000) as fake:
            fake.seed_main({"README.md": "widgets\n"})
            with httpx.Client(
                base_url=fake.api_url,
                headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "bench"},
                timeout=30,
            ) as people:
                for n in range(briefs):
                    made = people.post(
                        f"/repos/{fake.slug}/issues",
                        json={"title": f"Files {n}", "body": BODY, "labels": ["assay"]},
                    )
                    made.raise_for_status()
            desks = root / "desks"
            _desk(desks, compress)
            env = assay_env(
                {
                    "GITHUB_API_URL": fake.api_url,
                    "GITHUB_TOKEN": "ghs-bot",
                    "ASSAY_STATE": str(root / "state"),
                    "ASSAY_GATE_STATE": str(root / "gate-state"),
                    "ASSAY_GITHUB_WRITE_SPACING": "0",
                }
            )
            forge = ["--forge", f"github:{fake.slug}", "--desks", str(desks)]
            accepted = subprocess.run(
                assay_argv("github", "events", "--json", *forge[:2]),
                cwd=root,
                env={**env, WINDOW_ENV: "0.05"},
                capture_output=True,
                text=True,
                timeout=1200,
            )
            if accepted.returncode != 0:
                raise RuntimeError(f"events job: {accepted.stderr[-2000:]}")
            limits.push_window_s = minute
            limits.creates_per_minute, limits.creates_per_hour = (
                Limits().creates_per_minute,
                (Limits().creates_per_hour),
            )
            pushes_before, calls_before = len(fake.pushes), len(fake.calls)
            started = fake.clock()
            fleet = [
                subprocess.Popen(
                    assay_argv("desk", "run", "coder", "--json", *forge),
                    cwd=root,
                    env={**env, WINDOW_ENV: str(minute)},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                for _ in range(PROCESSES)
            ]
            time.sleep(run_s)  # a benchmark's run, not a test's synchronisation
            cpu = 0.0
            for proc in fleet:
                os.killpg(proc.pid, signal.SIGKILL)
                _, _, usage = os.wait4(proc.pid, 0)
                cpu += usage.ru_utime + usage.ru_stime
            ended = fake.clock()
            pushed = [t - started for t in fake.pushes[pushes_before:] if t <= ended]
            writes = [
                c.at - started
                for c in fake.calls[calls_before:]
                if c.user == BOT and c.method != "GET" and not c.path.startswith("git:")
            ]
            throttled = [t for t in fake.throttled_pushes if started <= t <= ended]
            with open_forge(str(fake.bare), cache_dir=root / "reader") as reader:
                records, _ = ClaimStore(reader).scan()
            done = sum(1 for r in records if r.state == "done")
    per_minute = [
        sum(1 for t in pushed if m * minute <= t < (m + 1) * minute)
        for m in range(math.ceil(minutes))
    ]
    write_minutes = [
        sum(1 for t in writes if m * minute <= t < (m + 1) * minute)
        for m in range(math.ceil(minutes))
    ]
    return {
        "minutes": minutes,
        "compress": compress,
        "desks": PROCESSES * SLOTS,
        "briefs_done": done,
        "briefs_per_hour": done * 60 / minutes,
        "pushes": len(pushed),
        "pushes_per_minute": per_minute,
        "most_pushes_in_any_minute": PushBudget(window=minute).count_in_window(pushed),
        "pushes_refused_over_budget": len(throttled),
        "rest_writes_per_minute": write_minutes,
        "cpu_s_per_brief": cpu / done if done else None,
        "pushes_per_brief": len(pushed) / done if done else None,
    }


def rows(f: dict[str, Any]) -> list[tuple[str, str, str]]:
    if "error" in f:
        return [("fleet on GitHub's budget", "n/a", f["error"])]
    note = (
        f"{f['desks']} desks, {f['minutes']:g} simulated minutes at {f['compress']:g}x, "
        f"40 calls of 2 s a brief, window mode"
    )
    return [
        (
            "fleet on GitHub: most pushes in any minute",
            str(f["most_pushes_in_any_minute"]),
            f"target <= 6 every minute; by minute {f['pushes_per_minute']}; {note}",
        ),
        (
            "fleet on GitHub: pushes refused over the budget",
            str(f["pushes_refused_over_budget"]),
            "the host's ledger keeps to the budget: must be 0",
        ),
        (
            "fleet on GitHub: REST writes in the busiest minute",
            str(max(f["rest_writes_per_minute"], default=0)),
            f"target < 80; the desks' own (claims and checkpoints are git): "
            f"{f['rest_writes_per_minute']}",
        ),
        (
            "fleet on GitHub: briefs finished per hour per repository",
            f"{f['briefs_per_hour']:.0f}",
            f"target >= 100; {f['briefs_done']} in {f['minutes']:g} min, "
            f"{f['pushes_per_brief'] or 0:.2f} pushes a brief",
        ),
        (
            "fleet on GitHub: desk CPU-seconds per brief",
            f"{f['cpu_s_per_brief'] or 0:.2f}",
            "four desk processes, user + system",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--compress", type=float, default=4.0)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    found = measure(minutes=options.minutes, compress=options.compress)
    if options.json:
        print(json.dumps(found, indent=2))
        return
    for name, value, note in rows(found):
        print(f"{name:<58} {value:>8}  {note}")


if __name__ == "__main__":
    main()
