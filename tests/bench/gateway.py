"""Model gateway benchmark: ``python -m tests.bench.gateway [--quick]``.

Prints, from one run on one machine, against the scripted upstream (``tests.fakes.wire``):

- the latency of one model call sent to the upstream directly, and through the gateway
  (journaled on a local-tier ``Run``: intent and result fsynced, no forge push), sampled
  alternately; the difference is the gateway's overhead per call (a forge desk adds its
  durability pushes, measured by ``tests.bench.journal``'s "Assay + push" rows);
- the gateway's own CPU a call (every thread of the process, less the same calls sent to
  the upstream directly) at 20, 100 and 200 calls of one conversation, with the session's
  conversation memo (``assay.runtime.memo``) and without it (``memo_budget=0``: every call works on
  every item again, as before the memo);
- replay speed: recorded calls a resumed CLI is served per second (no upstream call);
- a 100-call session killed while call 91 was in flight: upstream calls paid to get back
  (must be 1, the call in flight), and the wall time to get back to call 90 against the
  original run's.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from assay.errors import AssayError
from assay.gateway.calls import CallHandler
from assay.gateway.server import Gateway
from assay.gateway.upstream import Upstream
from assay.models.config import AnthropicConfig, Price
from assay.runtime import Run
from assay.runtime.memo import BUDGET_CHARS
from assay.runtime.wire import WireSession
from tests.fakes.wire import WireFake

KEY_ENV = "ASSAY_BENCH_UPSTREAM_KEY"
Result = dict[str, Any]
Row = tuple[str, str, str]


def script(turns: int) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "Bash", "arguments": {"command": f"echo {i}"}}]}
        for i in range(turns)
    ] + [{"content": "done"}]


def body(turn: int) -> dict[str, Any]:
    """The request of conversation turn ``turn`` (``turn`` assistant turns before it), its
    last message marked for the prompt cache as Claude Code marks it (the mark moves on
    with every request)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Run the commands."}]
    for i in range(turn):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"t{i}",
                        "name": "Bash",
                        "input": {"command": f"echo {i}"},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": str(i)}],
            }
        )
    if turn:
        messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    tools = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
    return {"model": "m", "max_tokens": 256, "messages": messages, "tools": tools}


@contextmanager
def gateway_run(
    journal: Path, fake: WireFake, *, fsync: bool = True, memo: bool = True
) -> Iterator[tuple[Gateway, CallHandler]]:
    """A gateway whose calls a background thread journals on a ``Run`` over ``journal``
    (``memo=False``: its session remembers nothing of the conversations it saw)."""
    os.environ[KEY_ENV] = "sk-bench"
    config = AnthropicConfig(
        adapter="anthropic", model="upstream", base_url=fake.url, api_key_env=KEY_ENV
    )
    run = Run.open(journal, fsync=fsync)
    upstream = Upstream(config, source="bench")
    handler: CallHandler
    session = WireSession(
        run,
        difference=lambda rec, req: handler.difference(rec, req),
        memo_budget=BUDGET_CHARS if memo else 0,
    )
    handler = CallHandler(session, upstream, price=Price(), allowed=lambda name: True)
    stop = threading.Event()
    with Gateway() as gateway:

        def serve() -> None:
            while not stop.is_set():
                try:
                    call = gateway.calls.get(timeout=0.05)
                except queue.Empty:
                    continue
                try:
                    handler.handle(call)
                except AssayError:
                    return

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield gateway, handler
        finally:
            stop.set()
            thread.join(10)
    run.close()
    upstream.close()


def overhead(samples: int) -> Result:
    """Median latency of a call sent directly, through a gateway journaling with fsync
    (the real thing), and through one without (the gateway's own cost), interleaved."""
    series: dict[str, list[float]] = {"direct": [], "gateway": [], "no_fsync": []}
    with (
        WireFake(script(samples)) as fake,
        tempfile.TemporaryDirectory() as tmp,
        gateway_run(Path(tmp) / "a", fake) as (real, _),
        gateway_run(Path(tmp) / "b", fake, fsync=False) as (light, _),
        httpx.Client() as client,
    ):
        targets = {
            "direct": (fake.url, "k"),
            "gateway": (real.url, real.token),
            "no_fsync": (light.url, light.token),
        }
        for turn in range(samples):
            payload = body(turn)
            for name, (url, key) in targets.items():
                t0 = time.perf_counter()
                answer = client.post(f"{url}/v1/messages", json=payload, headers={"x-api-key": key})
                series[name].append(time.perf_counter() - t0)
                assert answer.status_code == 200, answer.text
    d, g, n = (statistics.median(series[k]) * 1000 for k in ("direct", "gateway", "no_fsync"))
    return {"direct_ms": d, "gateway_ms": g, "overhead_ms": g - d, "no_fsync_overhead_ms": n - d}


CPU_CALLS = (20, 100, 200)


def gateway_cpu(calls: int) -> dict[str, float]:
    """The gateway's own CPU a call, in ms, over ``calls`` turns of one conversation, with
    the session's memo (``memo_ms``) and without it (``no_memo_ms``): the process's CPU
    (every thread) while a call goes through a gateway journaling without fsync, less
    while the same goes to the upstream directly. The three are sent turn by turn, so
    the shared machine's other work weighs on each alike, after a full garbage collection
    (not counted): the scripted upstream keeps every request it saw, and a collection
    walking them (tens of ms) would land on whichever call was running."""
    spent = {"direct": 0.0, "memo_ms": 0.0, "no_memo_ms": 0.0}
    with (
        WireFake(script(calls)) as fake,
        tempfile.TemporaryDirectory() as tmp,
        gateway_run(Path(tmp) / "a", fake, fsync=False) as (memo, _),
        gateway_run(Path(tmp) / "b", fake, fsync=False, memo=False) as (no_memo, _),
        httpx.Client() as client,
    ):
        targets = {
            "direct": (fake.url, "k"),
            "memo_ms": (memo.url, memo.token),
            "no_memo_ms": (no_memo.url, no_memo.token),
        }
        for turn in range(calls):
            payload = body(turn)
            gc.collect()
            for name, (url, key) in targets.items():
                t0 = time.process_time()
                answer = client.post(f"{url}/v1/messages", json=payload, headers={"x-api-key": key})
                spent[name] += time.process_time() - t0
                assert answer.status_code == 200, answer.text
    direct = spent.pop("direct")
    return {name: (cpu - direct) * 1000 / calls for name, cpu in spent.items()}


def cpu_table(sizes: tuple[int, ...] = CPU_CALLS, repeats: int = 3) -> Result:
    """``gateway_cpu`` of each size, the median of ``repeats`` runs."""
    table: Result = {}
    for n in sizes:
        runs = [gateway_cpu(n) for _ in range(repeats)]
        table[str(n)] = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    return table


def _session(gateway: Gateway, turns: range) -> list[float]:
    """Send turns in order; the instant each answer arrived (perf_counter)."""
    marks = []
    with httpx.Client(timeout=60) as client:
        for turn in turns:
            answer = client.post(
                f"{gateway.url}/v1/messages", json=body(turn), headers={"x-api-key": gateway.token}
            )
            assert answer.status_code == 200, answer.text
            marks.append(time.perf_counter())
    return marks


def replay_and_resume(calls: int, killed_at: int) -> Result:
    with WireFake(script(calls)) as fake, tempfile.TemporaryDirectory() as tmp:
        journal = Path(tmp) / "j"
        t0 = time.perf_counter()
        with gateway_run(journal, fake) as (gateway, _):
            marks = _session(gateway, range(killed_at + 1))
        original_s = marks[killed_at - 1] - t0  # to the answer of call `killed_at`
        _cut_after_intent(journal, killed_at + 1)  # call killed_at+1 was in flight
        paid_before = fake.answered
        t1 = time.perf_counter()
        with gateway_run(journal, fake) as (gateway, handler):
            resumed = _session(gateway, range(calls))
            replayed = handler.replayed
        resume_s = resumed[killed_at - 1] - t1
        paid = fake.answered - paid_before - (calls - killed_at - 1)
        rate = killed_at / (resumed[killed_at - 1] - t1)
    return {
        "calls": calls,
        "killed_at": killed_at,
        "replayed": replayed,
        "paid_on_resume": paid,
        "original_to_kill_s": original_s,
        "resume_to_kill_s": resume_s,
        "replay_calls_per_s": rate,
    }


def _cut_after_intent(journal: Path, pos: int) -> None:
    segment = sorted(journal.glob("*.jsonl"))[-1]
    lines = segment.read_bytes().splitlines(keepends=True)
    for index, line in enumerate(lines):
        entry = json.loads(line)
        if entry.get("pos") == pos and entry.get("status") == "started":
            segment.write_bytes(b"".join(lines[: index + 1]))
            return
    raise AssertionError(f"no intent at position {pos}")


def measure(*, quick: bool = False) -> Result:
    return {
        "overhead": overhead(20 if quick else 100),
        "cpu": cpu_table(CPU_CALLS[:2] if quick else CPU_CALLS),
        "resume": replay_and_resume(100, 90),
    }


def rows(result: Result) -> list[Row]:
    o, r = result["overhead"], result["resume"]
    cpu = [
        (
            f"gateway: its own CPU a call, {n} calls",
            f"{c['memo_ms']:.2f} ms",
            f"without the memo {c['no_memo_ms']:.2f} ms; less the upstream directly",
        )
        for n, c in result["cpu"].items()
    ]
    return [
        (
            "gateway: model call, upstream directly",
            f"{o['direct_ms']:.2f} ms",
            "scripted upstream, Anthropic JSON",
        ),
        (
            "gateway: model call through the gateway",
            f"{o['gateway_ms']:.2f} ms",
            f"+{o['overhead_ms']:.2f} ms: journaled, 6 fsyncs (2 lines, 4 blobs), local tier",
        ),
        (
            "gateway: its own overhead per call",
            f"{o['no_fsync_overhead_ms']:.2f} ms",
            "the same without fsync: HTTP, token, matching, content addressing",
        ),
        *cpu,
        (
            "gateway: replayed calls per second",
            f"{r['replay_calls_per_s']:.0f}",
            f"a resumed CLI fast-forwarding {r['killed_at']} recorded calls",
        ),
        (
            f"gateway: {r['calls']} calls, killed in call {r['killed_at'] + 1}: paid on resume",
            str(r["paid_on_resume"]),
            "must be 1: the call in flight",
        ),
        (
            f"gateway: back to call {r['killed_at']}: resume vs original",
            f"{r['resume_to_kill_s'] * 1000:.0f} ms vs {r['original_to_kill_s'] * 1000:.0f} ms",
            f"{r['original_to_kill_s'] / max(r['resume_to_kill_s'], 1e-9):.1f}x faster",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="only the CPU a call, memo or not")
    args = parser.parse_args(argv)
    if args.cpu:
        table = cpu_table(CPU_CALLS[:2] if args.quick else CPU_CALLS)
        for n, c in table.items():
            print(
                f"{n} calls: {c['memo_ms']:.2f} ms a call, without the memo {c['no_memo_ms']:.2f}"
            )
        return
    result = measure(quick=args.quick)
    for name, value, note in rows(result):
        print(f"{name}: {value} ({note})")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
