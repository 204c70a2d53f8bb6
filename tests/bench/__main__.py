"""The one benchmark command: ``python -m tests.bench [--quick] [--no-write]``.

Measures, in one run on this machine, and prints as ONE table:

- per durable step overhead: SQLite insert + fsync (floor), Assay local tier, Assay with
  every step pushed to a forge, DBOS (SQLite), LangGraph SqliteSaver (``tests.bench.peers``,
  which reuses ``tests.bench.journal``);
- resume latency of 1,000- and 10,000-step histories: Assay against DBOS recovery;
- journal bytes of a 200-turn conversation against a full-transcript-per-call journal;
- claims: acquire latency with 16 contenders against a bare ``git push`` (the floor) over
  smart HTTP (``tests.bench.claims``' functions): fresh processes reading the claim
  themselves, fresh processes from a read made before, and warm desks from their view;
- cost: git processes and fleet CPU-seconds per brief (``tests.bench.cost``);
- wake: approval push to the woken run's next entry, hook + waker against the warm desk
  host, and the host child's last step to its exit (``tests.bench.wake``);
- scale: 500 briefs and 20 desk processes on the served embedded forge (``tests.bench.scale``);
- the agent-CLI desk: Codex through ``assay desk run`` against Codex alone on the same
  scripted session, per brief (``tests.bench.clidesk``);
- resume: a 100-call Claude Code session killed with a call in flight, seconds to its next
  new call resumed natively against relaunched and replayed (``tests.bench.resume``);
- sandbox: one tool call in bubblewrap against a bare ``subprocess.run`` (``tests.bench.sandbox``);
- GitHub budget: requests and writes per brief lifecycle against the fake GitHub, beside
  issue 26's targets (8 and 5), and the briefs per hour one repository carries under
  GitHub's limits (``tests.bench.github_budget``);
- the model gateway: overhead per call against calling the upstream directly, replayed
  calls per second, and a 100-call session resumed after a kill (``tests.bench.gateway``);
- journal growth on a forge: a 100- and a 400-call agent-CLI conversation checkpointed to a
  real forge, bytes per call, old layout beside new (``tests.bench.growth``);
- main after 100 briefs merged by the gate: commits added and tree entries outside the
  briefs' own files, beside one commit per brief and none (``tests.bench.mainline``);
- durability modes: pushes per brief in step, window and exit mode for the scripted agent
  desk (4 calls), a 20-call scripted brief and a 40-call agent-CLI desk, beside the window
  target, and group commit's cost on an uncontended push (``tests.bench.durability``);
- the gate: one row of each kind (plain, pytest, ``node --test``) through ``verify`` beside
  the bare command, the gate's overhead per row, and holdout rows per second
  (``tests.bench.evidence``);
- records: the record tests themselves (the writer, claims, events, reviews, evidence, a
  sweep's batch, the read model) on the in-memory backend beside the git forge, their time
  and peak memory (``tests.bench.records``);
- a fleet on GitHub's budget: twenty desks on one host against the fake GitHub for five
  simulated minutes (time compressed 2x), 40-call briefs: pushes in every minute, REST
  writes a minute, briefs an hour (``tests.bench.fleet``).

Then writes the table, with a description of the machine, under "## Summary" at the top of
``docs/benchmarks.md`` (the per-area sections below it are left as they are). ``--quick``
is a smoke pass of a few minutes; the default is the full measurement. ``--only cost,wake``
runs some sections (without writing the page); ``--scale 100x10`` shrinks the scale run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bench import (
    clidesk,
    cost,
    durability,
    evidence,
    fleet,
    gateway,
    github_budget,
    growth,
    mainline,
    peers,
    records,
    resume,
    sandbox,
    scale,
    wake,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
Row = tuple[str, str, str]


def machine() -> dict[str, str]:
    """CPU model, cores, memory, OS, Python and git versions, load, date."""
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with open("/proc/meminfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "git": git.removeprefix("git version "),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def claims_rows(*, quick: bool) -> tuple[list[Row], dict[str, float]]:
    from assay.forge import init_forge
    from tests.bench.claims import acquire_figures, solo
    from tests.forge_fixtures import serve_process

    rounds = {16: 1} if quick else {16: 2}
    with tempfile.TemporaryDirectory(prefix="assay-bench-claims-") as tmp:
        root = Path(tmp)
        forge_path = init_forge(root / "forge.git")
        with serve_process(forge_path) as url:
            state = root / "http"
            # the floor and an uncontended acquire, sampled alternately (the claims module's)
            floor, single = solo(url, state, 4 if quick else 12)
            acquire = {1: single, **acquire_figures(url, state, rounds)}
            viewed = acquire_figures(url, state, rounds, from_view=True)
            desks = acquire_figures(url, state, rounds, from_view=True, warm=True)
    figures = {
        "push_floor": floor,
        "acquire_1": acquire[1],
        "acquire_16": acquire[16],
        "acquire_16_from_view": viewed[16],
        "acquire_16_warm_desks": desks[16],
    }
    return [
        ("claims: bare git push of one ref (floor)", f"{floor * 1e3:.1f} ms", "smart HTTP"),
        (
            "claims: acquire, 1 contender",
            f"{acquire[1] * 1e3:.1f} ms",
            f"{acquire[1] / floor:.2f}x the push floor",
        ),
        (
            "claims: acquire, 16 contenders",
            f"{acquire[16] * 1e3:.1f} ms",
            f"{acquire[16] / floor:.2f}x the push floor (target 4x); exactly 1 winner each "
            "round; each a fresh process's first claim, as `assay claim acquire` (it reads "
            "the claim, then pushes once)",
        ),
        (
            "claims: acquire, 16 contenders, from the desk's view",
            f"{viewed[16] * 1e3:.1f} ms",
            f"{viewed[16] / floor:.2f}x the push floor; a loser answers busy from the push's "
            "refusal, no second round trip; each a fresh process's first claim, from a read "
            "made before (not timed)",
        ),
        (
            "claims: acquire, 16 warm desks, from their view",
            f"{desks[16] * 1e3:.1f} ms",
            f"{desks[16] / floor:.2f}x the push floor (target 4x); each desk has claimed "
            "before (imports, HTTP client and cache warm), as a running desk loop is",
        ),
    ], figures


def table(rows: list[Row]) -> str:
    lines = ["| measure | value | note |", "| --- | ---: | --- |"]
    lines += [f"| {name} | {value} | {note} |" for name, value, note in rows]
    return "\n".join(lines)


def write_summary(text: str, doc: Path = DOC) -> None:
    """Put ``text`` under "## Summary" right after the page title, replacing an older one."""
    current = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    head, _, rest = current.partition("\n")
    rest = rest.lstrip("\n")
    if rest.startswith("## Summary"):
        following = re.search(r"^## (?!Summary)", rest, flags=re.MULTILINE)
        rest = rest[following.start() :] if following else ""
    doc.write_text(f"{head}\n\n## Summary\n\n{text.rstrip()}\n\n{rest}", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke pass")
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone"
    )
    parser.add_argument("--json", action="store_true", help="also print every raw figure")
    parser.add_argument(
        "--only",
        metavar="SECTIONS",
        default="",
        help="comma-separated sections to run (peers, gateway, growth, mainline, sandbox, "
        "durability, gate, records, claims, cost, "
        "wake, scale, clidesk, resume, github, fleet); "
        "implies --no-write",
    )
    parser.add_argument(
        "--scale",
        metavar="BRIEFSxDESKS",
        default="",
        help="size of the scale run (default 500x20; 40x4 with --quick)",
    )
    options = parser.parse_args(argv)
    quick = options.quick
    started = time.monotonic()

    def say(line: str) -> None:
        print(f"# [{time.monotonic() - started:6.0f} s] {line}", file=sys.stderr, flush=True)

    about = machine()
    raw: dict[str, Any] = {"machine": about}
    rows: list[Row] = []
    sections: list[tuple[str, Callable[[], list[Row]]]] = []

    def peer_rows() -> list[Row]:
        raw["peers"] = peers.measure(quick=quick, progress=say)
        return peers.rows(raw["peers"])

    def claim_rows() -> list[Row]:
        found, raw["claims"] = claims_rows(quick=quick)
        return found

    def scale_rows() -> list[Row]:
        briefs, desks = (40, 4) if quick else (500, 20)
        if options.scale:
            briefs, desks = (int(x) for x in options.scale.lower().split("x"))
        before = os.getloadavg()
        raw["scale"] = scale.measure(briefs=briefs, desks=desks)
        after = os.getloadavg()
        per_min = raw["scale"]["briefs_per_min"]
        return [
            *scale.rows(raw["scale"]),
            (
                "scale: briefs per minute against the target",
                f"{per_min:.1f}",
                f"{per_min / 300:.2f}x the 300/min target; load average before "
                f"{before[0]:.1f}, after {after[0]:.1f} (1 min)",
            ),
            (
                "scale: invariant problems",
                str(len(raw["scale"]["problems"])),
                "; ".join(
                    ["must be 0", *raw["scale"]["problems"][:3]]
                    + ([f"kept {raw['scale']['kept']}"] if raw["scale"]["kept"] else [])
                ),
            ),
        ]

    def cost_rows() -> list[Row]:
        raw["cost"] = cost.measure(briefs=16 if quick else 100, desks=2 if quick else 10)
        return cost.rows(raw["cost"])

    def wake_rows() -> list[Row]:
        rounds = 3 if quick else 7
        raw["wake"] = [wake.measure(mode, rounds) for mode in ("waker", "host")]
        return wake.rows(raw["wake"])

    def clidesk_rows() -> list[Row]:
        briefs = 2 if quick else 5
        found = clidesk.measure(cli="codex", briefs=briefs)
        raw["clidesk"] = found
        return clidesk.section_rows(found, f"codex, {briefs} briefs of 3 turns")

    def resume_rows() -> list[Row]:
        calls = 20 if quick else 100
        found = resume.measure(cli="claude-code", calls=calls)
        raw["resume"] = [vars(r) for r in found]
        return resume.rows(found, "claude-code")

    def github_rows() -> list[Row]:
        raw["github"] = github_budget.measure(briefs=2 if quick else 5)
        return github_budget.rows(raw["github"])

    def gateway_rows() -> list[Row]:
        raw["gateway"] = gateway.measure(quick=quick)
        return gateway.rows(raw["gateway"])

    def growth_rows() -> list[Row]:
        calls = [20, 80] if quick else [100, 400]
        raw["growth"] = growth.measure(calls, [growth.OLD, growth.new_layout()])
        return growth.rows(raw["growth"])

    def mainline_rows() -> list[Row]:
        briefs = 10 if quick else 100
        found = mainline.run(briefs)
        raw["mainline"] = found
        return [
            (
                f"main after {briefs} merged briefs: commits added",
                str(found["main_commits_added"]),
                f"target {briefs} (one per brief); "
                f"{found['branch_commits_kept_off_main']} checkpoint commits kept off main",
            ),
            (
                f"main after {briefs} merged briefs: entries outside the briefs' files",
                str(found["main_entries_outside_briefs"]),
                f"target 0; {found['journal_files_kept_off_main']} journal files kept off main",
            ),
        ]

    def durability_rows() -> list[Row]:
        raw["durability"] = durability.measure()
        return durability.rows(raw["durability"])

    def fleet_rows() -> list[Row]:
        minutes = 2.0 if quick else 5.0
        raw["fleet"] = fleet.measure(minutes=minutes, compress=2.0)
        return fleet.rows(raw["fleet"])

    def records_rows() -> list[Row]:
        raw["records"] = records.measure()
        return records.rows(raw["records"])

    def gate_rows() -> list[Row]:
        raw["gate"] = evidence.measure_kinds(runs=2 if quick else 5)
        return evidence.kind_rows(raw["gate"])

    def sandbox_rows() -> list[Row]:
        raw["sandbox"] = sandbox.measure(runs=10 if quick else 100)
        return sandbox.rows(raw["sandbox"])

    sections = [
        ("peers", peer_rows),
        ("gateway", gateway_rows),
        ("growth", growth_rows),
        ("mainline", mainline_rows),
        ("sandbox", sandbox_rows),
        ("durability", durability_rows),
        ("gate", gate_rows),
        ("records", records_rows),
        ("claims", claim_rows),
        ("cost", cost_rows),
        ("wake", wake_rows),
        ("scale", scale_rows),
        ("clidesk", clidesk_rows),
        ("resume", resume_rows),
        ("github", github_rows),
        ("fleet", fleet_rows),
    ]
    if options.only:
        wanted = {name.strip() for name in options.only.split(",")}
        sections = [(name, fn) for name, fn in sections if name in wanted]
        options.no_write = True
    for name, section in sections:
        say(f"{name}…")
        try:
            rows += section()
        except Exception as error:  # one broken section must not lose the others' figures
            say(f"{name} failed: {type(error).__name__}: {error}")
            rows.append((f"{name}: not measured", "failed", f"{type(error).__name__}: {error}"))
    elapsed = time.monotonic() - started
    described = (
        f"Measured {about['date']} in one run of `python -m tests.bench"
        f"{' --quick' if quick else ''}` ({elapsed / 60:.1f} min) on: {about['cpu']}, "
        f"{about['cores']} cores, {about['memory']} memory, {about['os']}, Python "
        f"{about['python']}, git {about['git']}; load average at the start {about['load']}."
    )
    text = f"{described}\n\n{table(rows)}\n"
    print(text)
    if options.json:
        print(json.dumps(raw, indent=2, default=str))
    if not options.no_write:
        write_summary(text)
        say(f"wrote the summary to {DOC}")


if __name__ == "__main__":
    main()
