"""Peer benchmark: ``python -m tests.bench.peers [--quick]`` (prints figures; not a test).

Side by side, in one process on one machine:

- per durable step: a plain SQLite insert committed with fsync (the floor; WAL,
  ``synchronous=FULL``), a raw append + fsync of one journal line, Assay's local tier,
  Assay with every step pushed to a forge (a bare repository over ``file://`` and the
  embedded forge over smart HTTP), DBOS on SQLite, LangGraph with SqliteSaver;
- resume latency for histories of 1,000 and 10,000 steps: Assay (``execute()`` on the
  journal, to the next new step's body) against DBOS recovery (``DBOS.launch()`` in a fresh
  process, whose recovery thread replays the pending workflow, to the next step's body);
- journal bytes of a 200-turn conversation against a full-transcript-per-call journal.

The journal figures reuse ``tests.bench.journal`` (same functions, same method).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.branch import BranchSync
from assay.forge import ForgeServer, init_forge, open_forge
from assay.plumbing import Identity, run_git
from assay.runtime import Event, Run, execute
from tests.bench import journal as jb

Figures = dict[str, Any]


def sqlite_floor(work: Path, n: int) -> float:
    """Median seconds of one small-row INSERT + COMMIT with fsync (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(work / f"floor-{time.monotonic_ns()}.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE steps (seq INTEGER PRIMARY KEY, body TEXT)")
    body = jb._floor_line().decode()
    times = []
    for i in range(n):
        started = time.perf_counter()
        conn.execute("BEGIN")
        conn.execute("INSERT INTO steps VALUES (?, ?)", (i, body))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - started)
    conn.close()
    return statistics.median(times)


class _PushHooks:
    """RunHooks that make every durability point one commit + CAS push (the desk loop's)."""

    def __init__(self, sync: BranchSync) -> None:
        self.sync = sync

    def durability_point(self, reason: str) -> None:
        self.sync.sync(f"bench: {reason}")

    def heartbeat(self, progress: dict[str, Any]) -> None:
        return None

    def ensure_owner(self) -> None:
        return None

    def events(self) -> list[Event]:
        return []


def assay_pushed(work: Path, url: str, n: int, tag: str) -> float:
    """Median seconds of one Assay effect step whose durability point pushes to ``url``."""
    forge = open_forge(url, cache_dir=work / f"cache-{tag}")
    try:
        sync = BranchSync(
            forge, f"bench-{tag}", workdir=work / f"wt-{tag}", identity=Identity("bench", "b@x")
        )
        sync.checkout()
        times: list[float] = []

        def desk(run: Run, _: Any) -> Any:
            for i in range(n):
                started = time.perf_counter()
                run.effect(f"e{i}", lambda key: None)
                times.append(time.perf_counter() - started)

        execute(desk, None, journal_dir=sync.journal_dir, hooks=_PushHooks(sync))
    finally:
        forge.close()
    return statistics.median(times)


_DBOS_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from dbos import DBOS
    db, steps, mode, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    DBOS(config={"name": "assay-bench-recover", "system_database_url": f"sqlite:///{db}",
                 "log_level": "ERROR"})

    @DBOS.step()
    def s(i: int) -> int:
        return i

    @DBOS.step()
    def next_step() -> None:
        if mode == "recover":
            reached = time.perf_counter()
            with open(out, "w") as f:
                f.write(repr(reached - float(os.environ["T0"])))
        os._exit(0)  # the crash: the workflow stays PENDING with `steps` recorded steps

    @DBOS.workflow()
    def wf(count: int) -> None:
        for i in range(count):
            s(i)
        next_step()

    os.environ["T0"] = repr(time.perf_counter())
    DBOS.launch()  # recovers PENDING workflows of this executor in a background thread
    if mode == "build":
        wf(steps)
    time.sleep(600)
    """
)


def dbos_recover(work: Path, steps: int) -> float | str:
    """Seconds from ``DBOS.launch()`` in a fresh process to the body of the step after
    ``steps`` recorded steps of a crashed workflow (its recovery)."""
    try:
        import dbos  # noqa: F401
    except ImportError:
        return "missing (pip install 'assay[bench]')"
    # Built on tmpfs when there is one: building 10,000 fsynced DBOS steps takes minutes and
    # measures nothing; the recovery read itself is what is timed.
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else work))
    try:
        script, db, out = base / "wf.py", base / "dbos.sqlite", base / "reached"
        script.write_text(_DBOS_SCRIPT, encoding="utf-8")
        for mode in ("build", "recover"):
            done = subprocess.run(
                [sys.executable, str(script), str(db), str(steps), mode, str(out)],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if done.returncode != 0:
                return f"failed ({mode}): {done.stderr.strip().splitlines()[-1:]}"
        return float(out.read_text())
    finally:
        shutil.rmtree(base, ignore_errors=True)


def assay_resume(work: Path, entries: int) -> float:
    """``tests.bench.journal.resume`` built on tmpfs like DBOS's history (wall seconds)."""
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else work))
    try:
        return jb.resume(base, entries)[0]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def measure(*, quick: bool, progress: Callable[[str], None] = lambda s: None) -> Figures:
    """Every peer figure; seconds for times, bytes for sizes, or a string for a missing peer."""
    n = 60 if quick else 300
    pushes = 15 if quick else 60
    histories = (1000,) if quick else (1000, 10_000)
    turns = 50 if quick else 200
    work = Path(tempfile.mkdtemp(prefix="assay-bench-peers-", dir=os.environ.get("BENCH_DIR")))
    figures: Figures = {"steps": n, "pushes": pushes, "turns": turns}
    try:
        progress("step overhead: floors and Assay local tier")
        figures["sqlite_floor"] = sqlite_floor(work, n)
        assay_times, floor_times = jb.assay_and_floor(work, n)
        figures["append_floor"] = statistics.median(floor_times)
        figures["assay_local"] = statistics.median(assay_times)
        progress("step overhead: Assay with forge push")
        forge_path = init_forge(work / "forge.git")
        file_url = f"file://{forge_path}"
        bare, step = interleaved(work, file_url, pushes, "file")
        figures.update(bare_push_file=bare, assay_push_file=step)
        with ForgeServer(forge_path) as server:
            bare, step = interleaved(work, server.url, pushes, "http")
            figures.update(bare_push_http=bare, assay_push_http=step)
        progress("step overhead: DBOS, LangGraph")
        figures["dbos_floor"] = sqlite_floor(work, n // 3)
        figures["dbos"] = jb.dbos_steps(work, n)
        figures["langgraph_floor"] = sqlite_floor(work, n // 3)
        figures["langgraph"] = jb.langgraph_steps(work, n)
        progress("resume: DBOS launch with an empty history (its fixed cost)")
        figures["dbos_resume_0"] = dbos_recover(work, 0)
        for steps in histories:
            progress(f"resume: {steps:,}-step history")
            figures[f"assay_resume_{steps}"] = assay_resume(work, steps)
            figures[f"dbos_resume_{steps}"] = dbos_recover(work, steps)
        progress("journal bytes")
        size, naive, distinct = jb.conversation_bytes(work, turns)
        figures.update(journal_bytes=size, naive_bytes=naive, distinct_bytes=distinct)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return figures


def fmt_time(value: Any) -> str:
    if not isinstance(value, float):
        return str(value)
    return f"{value * 1e3:.2f} ms" if value >= 1e-3 else f"{value * 1e6:.0f} us"


def rows(figures: Figures) -> list[tuple[str, str, str]]:
    """(measure, value, note) rows for the summary table."""
    floor = figures["sqlite_floor"]

    def x(key: str, base: float | None = None) -> str:
        value = figures.get(key)
        if not isinstance(value, float):
            return ""
        return f"{value / (base or floor):.2f}x the SQLite floor"

    out = [
        ("step: SQLite insert + fsync (floor)", fmt_time(floor), "WAL, synchronous=FULL"),
        ("step: raw append + fsync of a line", fmt_time(figures["append_floor"]), ""),
        ("step: Assay local tier", fmt_time(figures["assay_local"]), x("assay_local")),
        *push_rows(figures),
        (
            "step: DBOS (SQLite)",
            fmt_time(figures["dbos"]),
            x("dbos", figures["dbos_floor"]).replace("the", "its own"),
        ),
        (
            "step: LangGraph SqliteSaver",
            fmt_time(figures["langgraph"]),
            x("langgraph", figures["langgraph_floor"]).replace("the", "its own"),
        ),
    ]
    out.append(
        (
            "resume 0 steps: DBOS recovery (fixed cost)",
            fmt_time(figures["dbos_resume_0"]),
            "launch() to the first step, nothing recorded",
        )
    )
    for steps in (1000, 10_000):
        if f"assay_resume_{steps}" in figures:
            out.append(
                (
                    f"resume {steps:,} steps: Assay",
                    fmt_time(figures[f"assay_resume_{steps}"]),
                    "execute() to next step",
                )
            )
            out.append(
                (
                    f"resume {steps:,} steps: DBOS recovery",
                    fmt_time(figures[f"dbos_resume_{steps}"]),
                    "launch() to next step",
                )
            )
    turns = figures["turns"]
    out.append(
        (
            f"journal bytes, {turns}-turn chat: Assay",
            f"{figures['journal_bytes']:,} B",
            f"{figures['journal_bytes'] / figures['distinct_bytes']:.2f}x distinct messages",
        )
    )
    out.append(
        (
            f"journal bytes, {turns}-turn chat: full transcript per call",
            f"{figures['naive_bytes']:,} B",
            f"{figures['naive_bytes'] / figures['journal_bytes']:.0f}x Assay's",
        )
    )
    return out


def push_rows(figures: Figures) -> list[tuple[str, str, str]]:
    """A pushed step next to a bare push of one ref on the same transport (target 1.2x)."""
    out = []
    for transport, key in (("file://", "file"), ("smart HTTP", "http")):
        bare, step = figures[f"bare_push_{key}"], figures[f"assay_push_{key}"]
        out.append((f"step: bare git push of one ref ({transport})", fmt_time(bare), "floor"))
        out.append(
            (
                f"step: Assay + push ({transport})",
                fmt_time(step),
                f"{step / bare:.2f}x the bare push (target 1.2x); commit + CAS push per step",
            )
        )
    return out


def interleaved(work: Path, url: str, n: int, tag: str) -> tuple[float, float]:
    """Medians of (bare push of one ref, Assay pushed step), sampled alternately in one run
    so both see the same machine (this VM's load moves within seconds)."""
    forge = open_forge(url, cache_dir=work / f"cache-i{tag}")
    bare: list[float] = []
    steps: list[float] = []
    try:
        sync = BranchSync(
            forge, f"bench-i{tag}", workdir=work / f"wt-i{tag}", identity=Identity("bench", "b@x")
        )
        sync.checkout()
        parent: list[str] = []

        def desk(run: Run, _: Any) -> Any:
            for i in range(n):
                commit = forge.commit(
                    {"f.txt": f"{tag} {i}".encode()},
                    parents=list(parent),
                    message="floor",
                    author=Identity("bench", "b@x"),
                )
                started = time.perf_counter()
                ref = f"{commit}:refs/bench/floor-i{tag}"
                run_git(
                    ["push", "--quiet", url, ref], git_dir=forge.state_dir
                )  # the cache repository itself
                bare.append(time.perf_counter() - started)
                parent[:] = [commit]
                started = time.perf_counter()
                run.effect(f"e{i}", lambda key: None)
                steps.append(time.perf_counter() - started)

        execute(desk, None, journal_dir=sync.journal_dir, hooks=_PushHooks(sync))
    finally:
        forge.close()
    return statistics.median(bare), statistics.median(steps)


def pushes_only(*, pushes: int) -> Figures:
    """Only the pushed-step figures (``--pushes``): the bare push and Assay on both transports."""
    work = Path(tempfile.mkdtemp(prefix="assay-bench-push-", dir=os.environ.get("BENCH_DIR")))
    figures: Figures = {}
    try:
        forge_path = init_forge(work / "forge.git")
        file_url = f"file://{forge_path}"
        bare, step = interleaved(work, file_url, pushes, "file")
        figures.update(bare_push_file=bare, assay_push_file=step)
        with ForgeServer(forge_path) as server:
            bare, step = interleaved(work, server.url, pushes, "http")
            figures.update(bare_push_http=bare, assay_push_http=step)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return figures


def pack_build(*, files: int = 2000, rounds: int = 20) -> Figures:
    """A step's pack (3 files changed in a work tree of ``files``), built in process
    (``assay.forge.sendpack.build_pack``) and by git's ``pack-objects`` as ``send-pack``
    starts it; medians of wall and CPU seconds (git's is its child's CPU)."""
    import resource

    from assay.forge.sendpack import build_pack

    work = Path(tempfile.mkdtemp(prefix="assay-bench-pack-", dir=os.environ.get("BENCH_DIR")))
    try:
        forge = open_forge(str(init_forge(work / "forge.git")), cache_dir=work / "cache")
        who = Identity("bench", "b@x")
        tree = {f"src/d{n % 100}/f{n}.py": f"x = {n}\n".encode() * 20 for n in range(files)}
        base = forge.commit(tree, parents=[], message="base", author=who)
        changed = {**tree, "src/d1/f1.py": b"y\n", "src/d2/f2.py": b"z\n", ".assay/j": b"{}"}
        step = forge.commit(changed, parents=[base], message="step", author=who)
        ours: list[tuple[float, float]] = []
        gits: list[tuple[float, float]] = []
        args = ["pack-objects", "--all-progress-implied", "--revs", "--stdout", "--thin"]
        args += ["--delta-base-offset", "-q"]
        for _ in range(rounds):
            started, cpu = time.perf_counter(), time.process_time()
            size = len(build_pack(forge.state_dir, [step], hidden=[base]))
            ours.append((time.perf_counter() - started, time.process_time() - cpu))
            child = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            out = run_git(args, git_dir=forge.state_dir, input=f"{step}\n^{base}\n".encode())
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            spent = after.ru_utime + after.ru_stime - child.ru_utime - child.ru_stime
            gits.append((time.perf_counter() - started, spent))
        forge.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "files": files,
        "sendpack_wall": statistics.median(w for w, _ in ours),
        "sendpack_cpu": statistics.median(c for _, c in ours),
        "sendpack_bytes": size,
        "pack_objects_wall": statistics.median(w for w, _ in gits),
        "pack_objects_cpu": statistics.median(c for _, c in gits),
        "pack_objects_bytes": len(out.stdout),
    }


def profile(*, steps: int = 20, top: int = 12) -> str:
    """cProfile of Assay steps: local tier and pushed over smart HTTP (why a step costs what
    it costs); the functions with the most cumulative time."""
    import cProfile
    import io
    import pstats

    work = Path(tempfile.mkdtemp(prefix="assay-bench-profile-"))
    out = io.StringIO()
    try:
        forge_path = init_forge(work / "forge.git")
        with ForgeServer(forge_path) as server:
            for label, fn in (
                ("Assay local tier", lambda: jb.assay_and_floor(work, steps * 10)),
                ("Assay + push (smart HTTP)", lambda: assay_pushed(work, server.url, steps, "p")),
            ):
                profiler = cProfile.Profile()
                profiler.enable()
                fn()
                profiler.disable()
                out.write(f"== {label}\n")
                stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
                stats.print_stats(top)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps, 1,000-step resume only")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--profile", action="store_true", help="cProfile Assay's steps instead")
    parser.add_argument("--pushes", type=int, default=0, help="only the pushed-step lines")
    parser.add_argument(
        "--baseline", metavar="REF", help="with --pushes: also measure commit REF first"
    )
    parser.add_argument("--pack", action="store_true", help="only a step's pack, built 2 ways")
    options = parser.parse_args(argv)
    if options.pack:
        print(json.dumps(pack_build(), indent=2))
        return
    if options.pushes:
        before = None
        if options.baseline:
            from tests.bench import baseline

            before = baseline.figures(options.baseline, "peers", ["--pushes", str(options.pushes)])
        pushed = pushes_only(pushes=options.pushes)
        if options.json:
            print(json.dumps(pushed, indent=2))
            return
        if before is not None:
            for name, value, note in push_rows(before):
                print(f"{options.baseline}: {name:<44} {value:>12}  {note}")
        for name, value, note in push_rows(pushed):
            print(f"{name:<52} {value:>14}  {note}")
        return
    if options.profile:
        print(profile())
        return
    figures = measure(quick=options.quick, progress=lambda s: print(f"# {s}", file=sys.stderr))
    if options.json:
        print(json.dumps(figures, indent=2))
        return
    for name, value, note in rows(figures):
        print(f"{name:<52} {value:>14}  {note}")


if __name__ == "__main__":
    main()
