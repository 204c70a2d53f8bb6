"""Benchmark of the sweepers and the board: ``python -m tests.bench.board [--briefs N]``.

Prints figures; it is not a timed test. On a forge of N briefs (default 1,000) in every
state, built in one fast-import:

- one sweep over N claims: wall time and git round trips (fetch / push / ls-remote commands
  counted on the open forge), as a dry run, acting, and again (idempotent);
- the board: collecting the state (cold, parsing every brief; warm, from the brief cache)
  and rendering BOARD.md and the HTML page;
- on the served embedded forge with the wake hook installed: the time from an approval push
  to the waker's wake record on the forge.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

NETWORK_METHODS = ("fetch", "push", "ls_refs")


class RoundTrips:
    """Counts the forge's network calls (fetch, push, ls-refs: one git round trip each) by
    wrapping the methods of one open ``Forge`` instance; behaviour is unchanged."""

    def __init__(self, forge: Any) -> None:
        self.counts: Counter[str] = Counter()
        for name in NETWORK_METHODS:
            setattr(forge, name, self._counting(name, getattr(forge, name)))

    def _counting(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[name] += 1
            return method(*args, **kwargs)

        return counted

    def measure(self, fn: Callable[[], Any]) -> tuple[Any, float, Counter[str]]:
        self.counts = Counter()
        started = time.perf_counter()
        result = fn()
        return result, time.perf_counter() - started, Counter(self.counts)


def _trips(commands: Counter[str]) -> str:
    total = sum(commands.values())
    detail = ", ".join(f"{name} {count}" for name, count in sorted(commands.items()))
    return f"{total} ({detail or 'none'})"


def bench_sweep_and_board(root: Path, briefs: int) -> list[tuple[str, str]]:
    from assay.board.render import render_html, render_markdown
    from assay.forge import init_forge, open_forge
    from assay.forgestate.rows import collect_board
    from assay.sweep.engine import run_sweep
    from assay.sweep.policy import parse_policy
    from tests.board.bulk import build_bulk_forge

    rows: list[tuple[str, str]] = []
    forge_path = init_forge(root / "forge.git")
    started = time.perf_counter()
    build_bulk_forge(forge_path, briefs)
    rows.append(
        (
            f"build a forge of {briefs} briefs (fast-import)",
            f"{time.perf_counter() - started:.2f} s",
        )
    )
    claims = sum(1 for n in range(briefs) if n % 7 != 6)
    policies = [
        parse_policy({"kind": kind, **extra}, source=f"{kind}.yaml")
        for kind, extra in (
            ("stuck-claims", {}),
            ("waker", {"dispatch": "none"}),
            ("orphans", {}),
            ("budgets", {}),
            ("honest-status", {}),
        )
    ]
    with open_forge(str(forge_path), cache_dir=root / "cache") as forge:
        trips = RoundTrips(forge)
        report, seconds, commands = trips.measure(
            lambda: run_sweep(forge, policies, dry_run=True, by="bench")
        )
        rows.append(
            (
                f"sweep --dry-run over {claims} claims ({len(report.actions)} actions planned)",
                f"{seconds:.2f} s, git round trips {_trips(commands)}",
            )
        )
        report, seconds, commands = trips.measure(lambda: run_sweep(forge, policies, by="bench"))
        kinds = Counter(action.action for action in report.actions)
        rows.append(
            (
                f"sweep acting over {claims} claims ({dict(sorted(kinds.items()))})",
                f"{seconds:.2f} s, git round trips {_trips(commands)}",
            )
        )
        report, seconds, commands = trips.measure(lambda: run_sweep(forge, policies, by="bench"))
        rows.append(
            (
                f"second sweep (idempotent: {len(report.actions)} actions)",
                f"{seconds:.2f} s, git round trips {_trips(commands)}",
            )
        )
    with open_forge(str(forge_path), cache_dir=root / "board-cache") as forge:
        trips = RoundTrips(forge)
        (state, _), cold, commands = trips.measure(lambda: collect_board(forge))
        rows.append(
            (
                f"board: collect {briefs} briefs, cold (parses every brief)",
                f"{cold:.2f} s, git round trips {_trips(commands)}",
            )
        )
        (state, _), warm, _ = trips.measure(lambda: collect_board(forge))
        rows.append((f"board: collect {briefs} briefs, warm (brief cache)", f"{warm:.2f} s"))
    started = time.perf_counter()
    markdown = render_markdown(state)
    md_s = time.perf_counter() - started
    started = time.perf_counter()
    html = render_html(state)
    html_s = time.perf_counter() - started
    rows.append((f"board: render BOARD.md ({len(markdown) // 1024} KiB)", f"{md_s * 1000:.0f} ms"))
    rows.append((f"board: render HTML ({len(html) // 1024} KiB)", f"{html_s * 1000:.0f} ms"))
    same = render_markdown(state) == markdown and render_html(state) == html
    rows.append(("board: same bytes on a second render", "yes" if same else "NO"))
    return rows


def bench_wake(root: Path, rounds: int) -> list[tuple[str, str]]:
    """Approval push -> the hook's waker records the wake, on the served embedded forge."""
    from assay.claims.store import ClaimStore
    from assay.forge import ForgeServer, RefLog, init_forge, open_forge
    from assay.plumbing import ASSAY_IDENTITY
    from assay.runtime import Event
    from assay.sweep.hook import install_wake_hook

    forge_path = init_forge(root / "wake.git")
    workdir = root / "wake-workdir"
    (workdir / "sweepers").mkdir(parents=True)
    (workdir / "sweepers" / "waker.yaml").write_text("kind: waker\ndispatch: none\n")
    install_wake_hook(forge_path, workdir=workdir)
    latencies: list[float] = []
    with ForgeServer(forge_path) as server:
        server.start()
        with open_forge(server.url, cache_dir=root / "wake-cache") as forge:
            store = ClaimStore(forge)
            for n in range(rounds):
                brief = f"wake-{n}"
                claim = store.acquire(brief, "bench", lease_s=60)
                store.set_waiting(claim, "approval")
                status = RefLog.for_brief(forge, "status", brief)
                event = Event(id=f"approve-{n}", kind="approve", actor="bench")
                started = time.perf_counter()
                RefLog.for_brief(forge, "events", brief).append(
                    {"event": event.to_json()}, author=ASSAY_IDENTITY
                )
                deadline = started + 60
                while time.perf_counter() < deadline:
                    if status.head(fetch=True):
                        latencies.append(time.perf_counter() - started)
                        break
    if not latencies:
        return [("approval push -> wake recorded (served forge, hook)", "no wake seen")]
    latencies.sort()
    median = latencies[len(latencies) // 2]
    return [
        (
            f"approval push -> wake recorded by the hook (served forge, {len(latencies)} runs)",
            f"median {median * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms",
        )
    ]


def bench_desk_wake(root: Path, rounds: int) -> list[tuple[str, str]]:
    """With the real desk loop on the served forge: a desk's last step (its ``wait`` entry)
    to its process exiting, and an approval push to the woken run's next entry (``wake``)."""
    import subprocess

    from assay.desks.records.events import EventLog
    from assay.forge import ForgeServer, init_forge, open_forge
    from assay.forgestate.source import read_snapshot
    from assay.forgestate.times import parse_time
    from assay.sweep.hook import install_wake_hook
    from tests.conftest import assay_argv, assay_env
    from tests.desks.world import brief_text
    from tests.forge_fixtures import put_on_main

    forge_path = init_forge(root / "desk.git")
    desks = root / "desks"
    write_coder_desk(desks)
    workdir = root / "desk-waker"
    (workdir / "sweepers").mkdir(parents=True)
    (workdir / "sweepers" / "waker.yaml").write_text(
        f"kind: waker\ndispatch: local\ndesks_dir: {desks}\n"
    )
    install_wake_hook(forge_path, workdir=workdir)
    briefs = [f"wake-{n}" for n in range(rounds)]
    put_on_main(
        forge_path,
        {f"briefs/{b}.md": brief_text(b, labels=["approval"]) for b in briefs},
    )
    suspend: list[float] = []
    wake: list[float] = []
    with ForgeServer(forge_path) as server:
        server.start()
        with open_forge(server.url, cache_dir=root / "desk-cache") as forge:
            for brief in briefs:
                done = subprocess.run(
                    assay_argv(
                        "desk",
                        "run",
                        "coder",
                        "--once",
                        "--brief",
                        brief,
                        "--forge",
                        server.url,
                        "--desks",
                        str(desks),
                    ),
                    env=assay_env(),
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                exited = time.time()
                if done.returncode != 75:
                    return [
                        (
                            "desk wake benchmark",
                            f"desk exited {done.returncode}: {done.stderr[-200:]}",
                        )
                    ]
                journal = read_snapshot(forge).journals[brief]
                waited = journal.last_at
                if waited is not None:
                    suspend.append(exited - waited.timestamp())
                pushed = time.time()
                EventLog(forge, brief).append("approve", actor="bench")
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    snapshot = read_snapshot(forge, only_brief=brief)
                    claim = snapshot.claims.get(brief)
                    if claim is not None and claim.state == "done":
                        break
                full = read_snapshot(forge).journals[brief]
                del full
                woke = _wake_time(forge, brief)
                if woke is not None:
                    wake.append(woke - pushed)

    def summary(values: list[float]) -> str:
        if not values:
            return "not measured"
        ordered = sorted(values)
        return (
            f"median {ordered[len(ordered) // 2] * 1000:.0f} ms, "
            f"max {ordered[-1] * 1000:.0f} ms ({len(values)} runs)"
        )

    del parse_time
    return [
        ("desk: last step (wait) -> process exited, suspended", summary(suspend)),
        ("desk: approval push -> woken run's next entry (hook, waker, desk)", summary(wake)),
    ]


def write_coder_desk(desks: Path) -> None:
    """The scripted ``coder`` desk both wake benchmarks run: write hello.txt, then finish."""
    import yaml

    from tests.desks.world import finish, write

    (desks / "scripts").mkdir(parents=True)
    script = {"responses": [write("hello.txt", "hi\n"), finish("ready")]}
    (desks / "scripts" / "coder.json").write_text(json.dumps(script))
    manifest = {
        "name": "coder",
        "kind": "agent",
        "takes": {"globs": ["*"]},
        "model": {"adapter": "scripted", "script": "scripts/coder.json"},
        "tools": ["read_file", "write_file", "list_files", "finish"],
        "lease": 30,
    }
    (desks / "coder.yaml").write_text(yaml.safe_dump(manifest))


def _wake_time(forge: Any, brief: str) -> float | None:
    from assay.forgestate.source import journal_entries
    from assay.forgestate.times import parse_time

    tip = forge.fetch(f"refs/heads/assay/{brief}").get(f"refs/heads/assay/{brief}")
    if not tip:
        return None
    with forge.batch() as batch:
        entries, _, _ = journal_entries(batch, tip, brief)
    for entry in entries:
        if entry.get("kind") == "wake":
            moment = parse_time(entry.get("t"))
            return moment.timestamp() if moment else None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--briefs", type=int, default=1000)
    parser.add_argument("--wake-rounds", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="assay-bench-board-") as tmp:
        root = Path(tmp)
        os.environ.setdefault("ASSAY_STATE", str(root / "state"))
        rows = bench_sweep_and_board(root, args.briefs)
        rows += bench_wake(root, args.wake_rounds)
        rows += bench_desk_wake(root, args.wake_rounds)
    width = max(len(label) for label, _ in rows)
    print(f"Sweepers and board ({os.cpu_count()} CPUs, Python {sys.version.split()[0]})")
    for label, value in rows:
        print(f"  {label.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
