"""Journal benchmark: ``python -m tests.bench.journal [--steps N] [--quick]``.

Prints, from one run on one machine:

- the floor: one raw append + fsync of a journal-sized line;
- the median overhead of one durable step: Assay (local tier), DBOS steps on its SQLite
  system database, LangGraph checkpoints with SqliteSaver (peers from the ``bench`` extra;
  reported as missing when not installed);
- the time to resume journals of 1,000 and 10,000 entries to their next step (the median
  of five resumes of copies of one journal);
- the journal bytes of a 200-turn conversation against a naive journal that records the
  full transcript with every call.

Assay's step overhead is the median duration of a ``run.step`` call with a no-op body,
interleaved with floor samples. The peers' is the median interval between the starts of
consecutive no-op step bodies (their steps cannot be timed from outside), which holds
the same work: bookkeeping and the durable write of one step.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from assay.journal.format import encode_line
from assay.models.base import Message
from assay.runtime import Run, execute
from tests.runtime.helpers import Talker

Result = dict[str, Any]


def _intervals(marks: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(marks)]


def _median_interval(marks: list[float]) -> float:
    return statistics.median(_intervals(marks))


def _floor_line() -> bytes:
    raw, _ = encode_line(
        {
            "v": 1,
            "seq": 1,
            "prev": "sha256:" + "0" * 64,
            "run": "r" * 32,
            "fence": 0,
            "kind": "step",
            "pos": 1,
            "step": "compute",
            "name": "s",
            "status": "ok",
            "key": "k" * 34,
            "out": {"value": None},
            "t0": "2026-01-01T00:00:00.000000+00:00",
            "t1": "2026-01-01T00:00:00.000000+00:00",
            "ms": 0.01,
        }
    )
    return raw + b"\n"


def floor(work: Path, n: int) -> float:
    """Median seconds of ``n`` raw appends + fsyncs of a journal-sized line."""
    line = _floor_line()
    times = []
    with open(work / f"floor-{time.monotonic_ns()}.jsonl", "ab") as handle:
        for _ in range(n):
            start = time.perf_counter()
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def assay_and_floor(work: Path, n: int, *, fsync: bool = True) -> tuple[list[float], list[float]]:
    """Per-call seconds of ``n`` no-op durable steps, each followed by one floor sample
    (a raw append + fsync of a journal-sized line to another file), so that both see the
    same machine load."""
    line = _floor_line()
    step_times: list[float] = []
    floor_times: list[float] = []

    def noop() -> None:
        return None

    def desk(run: Run, _: Any) -> Any:
        with open(work / f"floor-{time.monotonic_ns()}.jsonl", "ab") as handle:
            for i in range(n):
                start = time.perf_counter()
                run.step(f"s{i}", noop)
                step_times.append(time.perf_counter() - start)
                start = time.perf_counter()
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
                floor_times.append(time.perf_counter() - start)

    execute(desk, None, journal_dir=work / f"assay-steps-{time.monotonic_ns()}", fsync=fsync)
    return step_times, floor_times


def dbos_steps(work: Path, n: int) -> float | str:
    try:
        from dbos import DBOS
    except ImportError:
        return "missing (pip install 'assay[bench]')"
    marks: list[float] = []
    DBOS(
        config={
            "name": "assay-bench",
            "system_database_url": f"sqlite:///{work / 'dbos.sqlite'}",
            "log_level": "ERROR",
        }
    )

    @DBOS.step()
    def noop() -> None:
        marks.append(time.perf_counter())

    @DBOS.workflow()
    def workflow(count: int) -> None:
        for _ in range(count):
            noop()

    DBOS.launch()
    try:
        workflow(n)
    finally:
        DBOS.destroy()
    return _median_interval(marks)


def langgraph_steps(work: Path, n: int) -> float | str:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, StateGraph
    except ImportError:
        return "missing (pip install 'assay[bench]')"
    from typing import TypedDict

    class State(TypedDict):
        n: int

    marks: list[float] = []

    def inc(state: State) -> State:
        marks.append(time.perf_counter())
        return {"n": state["n"] + 1}

    graph = StateGraph(State)
    graph.add_node("inc", inc)
    graph.set_entry_point("inc")
    graph.add_conditional_edges("inc", lambda s: END if s["n"] >= n else "inc")
    conn = sqlite3.connect(work / "langgraph.sqlite", check_same_thread=False)
    try:
        app = graph.compile(checkpointer=SqliteSaver(conn))
        config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": n + 10}
        # durability="sync": each checkpoint is written before the next step starts, the
        # guarantee a durable step gives (LangGraph's default writes them in the background).
        app.invoke({"n": 0}, config, durability="sync")
    finally:
        conn.close()
    return _median_interval(marks)


class _Stop(BaseException):
    pass


RESUME_SAMPLES = 5


def resume(work: Path, entries: int, samples: int = RESUME_SAMPLES) -> tuple[float, float]:
    """Medians of (wall, CPU) seconds from ``execute()`` to the body of the first new step
    after ``entries`` recorded entries: read + verify, rebuild the index, replay the code.

    The journal is built once; each sample resumes a fresh copy of it (a resume appends
    its wake entry), so the samples differ only in the machine's moment."""
    built = work / f"resume-{entries}"
    steps = entries - 2  # plus the start entry and a wait
    reached: list[float] = []

    def desk(run: Run, _: Any) -> Any:
        for i in range(steps):
            run.step(f"s{i}", lambda i=i: i)
        run.wait_for("go")

        def first_new() -> None:
            reached.extend((time.perf_counter(), time.process_time()))
            raise _Stop()

        run.step("next", first_new)

    execute(desk, None, journal_dir=built, fsync=False)  # build it (not measured)
    from assay.runtime import Event, LocalEventStore

    LocalEventStore(built).append(Event("go", "approve", data={"name": "go"}))
    walls, cpus = [], []
    for sample in range(samples):
        directory = work / f"resume-{entries}-{sample}"
        shutil.copytree(built, directory)
        reached.clear()
        start, cpu = time.perf_counter(), time.process_time()
        with contextlib.suppress(_Stop):
            execute(desk, None, journal_dir=directory)
        walls.append(reached[0] - start)
        cpus.append(reached[1] - cpu)
        shutil.rmtree(directory)
    return statistics.median(walls), statistics.median(cpus)


def conversation_bytes(work: Path, turns: int) -> tuple[int, int, int]:
    """(Assay journal bytes, naive full-transcript journal bytes, distinct message bytes)."""
    transcript: list[list[Message]] = []

    def desk(run: Run, _: Any) -> Any:
        messages: list[Message] = [{"role": "system", "content": "be helpful " * 20}]
        for turn in range(turns):
            messages.append({"role": "user", "content": f"question {turn}: " + "q" * 400})
            messages.append(run.model(messages).message)
            transcript.append(list(messages))

    directory = work / "conversation"
    execute(desk, None, journal_dir=directory, model=Talker(400), fsync=False)
    size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    naive = sum(len(json.dumps({"step": i, "messages": m})) + 1 for i, m in enumerate(transcript))
    final = transcript[-1]
    distinct = sum(len(json.dumps(m, separators=(",", ":"))) for m in final)
    return size, naive, distinct


def _us(value: float | str) -> str:
    return f"{value * 1e6:9.0f} us" if isinstance(value, float) else value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per engine (default 300)")
    parser.add_argument("--turns", type=int, default=200, help="conversation turns (default 200)")
    options = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="assay-bench-journal-", dir=os.environ.get("BENCH_DIR")))
    try:
        n = options.steps
        results: Result = {}
        assay_times, floor_times = assay_and_floor(work, n)
        results["floor"] = statistics.median(floor_times)
        results["assay"] = statistics.median(assay_times)
        results["assay_cpu"] = statistics.median(assay_and_floor(work, n, fsync=False)[0])
        # The machine's fsync latency drifts: each peer gets a floor measured just before it.
        results["dbos_floor"] = floor(work, n // 3)
        results["dbos"] = dbos_steps(work, n)
        results["langgraph_floor"] = floor(work, n // 3)
        results["langgraph"] = langgraph_steps(work, n)
        results["resume_1000"] = resume(work, 1000)
        results["resume_10000"] = resume(work, 10_000)
        size, naive, distinct = conversation_bytes(work, options.turns)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    version = sys.version.split()[0]
    load = os.getloadavg()[0]
    print(
        f"journal benchmark  (python {version}, {n} steps each, {os.cpu_count()} cpus, "
        f"load average {load:.1f})"
    )
    print(f"  floor: append + fsync of one line      {_us(results['floor'])}")
    print(
        f"  Assay durable step (local tier)         {_us(results['assay'])}"
        f"   = {results['assay'] / results['floor']:.2f}x floor"
    )
    print(f"  Assay step bookkeeping alone (no fsync)  {_us(results['assay_cpu'])}")
    assay_x = results["assay"] / results["floor"]
    for peer in ("dbos", "langgraph"):
        label = {
            "dbos": "DBOS step (SQLite system db)",
            "langgraph": "LangGraph step (SqliteSaver)",
        }[peer]
        value = results[peer]
        ratio = ""
        if isinstance(value, float):
            own = value / results[f"{peer}_floor"]
            ratio = (
                f"   = {own:.2f}x its own floor of {_us(results[f'{peer}_floor']).strip()};"
                f" Assay/peer, each over its floor = {assay_x / own:.2f}"
            )
        print(f"  {label:<40}{_us(value)}{ratio}")
    for entries in ("1000", "10000"):
        wall, cpu = results[f"resume_{entries}"]
        label = f"resume {int(entries):,}-entry journal to next step"
        print(f"  {label:<40}{wall * 1000:8.1f} ms  (CPU {cpu * 1000:.1f} ms)")
    print(
        f"  {options.turns}-turn conversation: Assay journal {size:,} B; naive full-transcript "
        f"journal {naive:,} B ({naive / size:.0f}x); distinct messages {distinct:,} B "
        f"(journal = {size / distinct:.2f}x)"
    )


if __name__ == "__main__":
    main()
