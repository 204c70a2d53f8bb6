"""Claims benchmark: ``python -m tests.bench.claims`` prints figures (not a timed test).

* acquire latency (median) with 1, 4 and 16 contenders over file:// and smart HTTP, next to
  the floor: a bare ``git push`` of one new small commit to one new ref on that transport;
* ``claim list`` over 1,000 claims (one fetch), cold and warm cache;
* heartbeat cost: one renewal (build a commit, CAS push) per transport.

One contender acquires from this process, as the floor pushes; 4 and 16 contenders are
forked processes released together by a pipe barrier, each timing only its own
``ClaimStore.acquire`` call. ``--quick`` runs fewer rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from assay.claims import CLAIM_FILE, ClaimRecord, ClaimStore
from assay.claims.record import format_time, now_utc
from assay.errors import Busy
from assay.forge import Forge, init_forge, open_forge
from assay.plumbing import ASSAY_IDENTITY, RefUpdate, run_git
from tests.forge_fixtures import serve_process


def solo(url: str, state: Path, samples: int) -> tuple[float, float]:
    """Medians of (bare ``git push``, uncontended acquire), sampled alternately.

    The floor pushes one new small commit to one new ref: the work an uncontended acquire
    cannot avoid (one small commit, one ref update, one round trip). Alternating the two
    makes them share whatever else the machine is doing at that moment.
    """
    with open_forge(url, cache_dir=state / "solo-cache") as forge:
        store = ClaimStore(forge)
        floor, acquire = [], []
        for i in range(samples):
            commit = forge.commit(
                {"claim.json": f"floor {state.name} {i}".encode()},
                parents=[],
                message="floor",
                author=ASSAY_IDENTITY,
            )
            started = time.perf_counter()
            run_git(
                ["push", "--quiet", url, f"{commit}:refs/bench/{state.name}-{i}"],
                git_dir=forge.state_dir,  # the cache repository itself
            )
            floor.append(time.perf_counter() - started)
            started = time.perf_counter()
            store.acquire(f"solo-{state.name}-{i}", "bench", lease_s=300)
            acquire.append(time.perf_counter() - started)
    return statistics.median(floor), statistics.median(acquire)


def contend(
    url: str, brief: str, n: int, state: Path, *, from_view: bool = False, warm: bool = False
) -> list[tuple[bool, float]]:
    """Fork ``n`` processes that acquire ``brief`` at one instant; (won, seconds) each.

    ``from_view``: each contender acquires as the desk loop does, from the read it made
    before (``acquire(seen=None)``: the brief was unclaimed), so a loser answers from the
    refusal alone; otherwise as ``assay claim acquire`` does, reading the claim itself
    first (the loser still answers from the refusal).
    ``warm``: each contender has first acquired a brief of its own, as a desk that has
    worked before (its imports, HTTP client and cache warm); otherwise each is a fresh
    process's first claim."""
    barrier_r, barrier_w = os.pipe()
    ready_r, ready_w = os.pipe()
    report_r, report_w = os.pipe()
    pids = []
    sys.stdout.flush()
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(barrier_w)
                os.close(ready_r)
                os.close(report_r)
                forge = open_forge(url, cache_dir=state / f"cache-{i}")
                store = ClaimStore(forge)
                if warm:
                    store.acquire(f"{brief}-own-{i}", f"bench-{i}", lease_s=300)
                os.write(ready_w, b".")
                os.close(ready_w)  # a child that died before this leaves EOF, not a hang
                os.read(barrier_r, 1)
                started = time.perf_counter()
                try:
                    if from_view:
                        store.acquire(brief, f"bench-{i}", lease_s=300, seen=None)
                    else:
                        store.acquire(brief, f"bench-{i}", lease_s=300)
                    won = 1
                except Busy:
                    won = 0
                elapsed = time.perf_counter() - started
                os.write(report_w, f"{won} {elapsed}\n".encode())
                forge.close()
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(barrier_r)
    os.close(ready_w)
    os.close(report_w)
    with os.fdopen(ready_r, "rb") as ready:
        arrived = len(ready.read(n))  # every child at the barrier (or dead: fewer bytes)
    os.close(barrier_w)
    for pid in pids:
        os.waitpid(pid, 0)
    with os.fdopen(report_r) as reports:
        lines = reports.read().split()
    results = [(lines[k] == "1", float(lines[k + 1])) for k in range(0, len(lines), 2)]
    winners = sum(won for won, _ in results)
    if winners != 1 or len(results) != n or arrived != n:
        raise SystemExit(
            f"race on {brief}: {winners} winners among {len(results)} reports"
            f" ({arrived} of {n} reached the barrier)"
        )
    return results


def acquire_figures(
    url: str, state: Path, rounds: dict[int, int], *, from_view: bool = False, warm: bool = False
) -> dict[int, float]:
    figures: dict[int, float] = {}
    tag = ("v" if from_view else "c") + ("w" if warm else "")
    for n, count in rounds.items():
        samples: list[float] = []
        for r in range(count):
            brief = f"bench-{state.name}-{tag}{n}-{r}"
            samples += [t for _, t in contend(url, brief, n, state, from_view=from_view, warm=warm)]
        figures[n] = statistics.median(samples)
    return figures


def seed_claims(forge: Forge, count: int) -> None:
    stamp = format_time(now_utc())
    updates = []
    for i in range(count):
        record = ClaimRecord(
            brief=f"seed-{i:04d}",
            desk="seed",
            holder=f"h{i}",
            fence=1,
            state="held",
            since=stamp,
            renewed_at=stamp,
            lease_s=300,
        )
        commit = forge.commit(
            {CLAIM_FILE: record.to_bytes()}, parents=[], message="seed", author=ASSAY_IDENTITY
        )
        updates.append(RefUpdate(record.ref, commit, expected=None))
    result = forge.push(updates, atomic=True)
    assert result.ok, result.detail


def list_figures(url: str, state: Path) -> tuple[float, float, int]:
    with open_forge(url, cache_dir=state / "list-cache") as forge:
        store = ClaimStore(forge)
        started = time.perf_counter()
        count = len(store.list())
        cold = time.perf_counter() - started
        started = time.perf_counter()
        store.list()
        warm = time.perf_counter() - started
    return cold, warm, count


def heartbeat_figure(url: str, state: Path, samples: int) -> float:
    with open_forge(url, cache_dir=state / "hb-cache") as forge:
        store = ClaimStore(forge)
        claim = store.acquire(f"heartbeat-{state.name}", "bench", lease_s=300)
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            store.renew(claim)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Fewer rounds (a smoke run).")
    args = parser.parse_args(argv)
    rounds = {4: 1, 16: 1} if args.quick else {4: 2, 16: 1}
    samples = 4 if args.quick else 12
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as tmp:
        root = Path(tmp)
        forge_path = init_forge(root / "forge.git")
        rows: list[tuple[str, float, dict[int, float], float, float]] = []
        with serve_process(forge_path) as http_url:
            for name, url in (("file://", f"file://{forge_path}"), ("smart HTTP", http_url)):
                state = root / name.replace(":", "").replace("/", "").replace(" ", "-")
                floor, solo_acquire = solo(url, state, samples)
                acquire = {1: solo_acquire, **acquire_figures(url, state, rounds)}
                desks = acquire_figures(url, state, {16: 1}, from_view=True, warm=True)[16]
                beat = heartbeat_figure(url, state, samples)
                rows.append((name, floor, acquire, desks, beat))
        many = init_forge(root / "many.git")
        with open_forge(str(many), cache_dir=root / "seed-cache") as forge:
            seed_claims(forge, 1000)
        with serve_process(many) as many_url:
            list_rows = [
                ("file://", *list_figures(f"file://{many}", root / "lf")),
                ("smart HTTP", *list_figures(many_url, root / "lh")),
            ]
    print("Claims benchmark (medians; milliseconds)")
    print()
    print("x4, x16: fresh processes, each its first claim, as `assay claim acquire` (it reads")
    print("the claim, then pushes once); x16 desks: 16 warm desks acquiring from their view.")
    print()
    print("| transport | push floor | acquire x1 | x4 | x16 | x16 / floor | x16 desks | / floor |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, floor, acquire, desks, _ in rows:
        print(
            f"| {name} | {floor * 1000:.1f} | {acquire[1] * 1000:.1f} | {acquire[4] * 1000:.1f} "
            f"| {acquire[16] * 1000:.1f} | {acquire[16] / floor:.2f} | {desks * 1000:.1f} "
            f"| {desks / floor:.2f} |"
        )
    print()
    print("| transport | renew |")
    print("| --- | --- |")
    for name, _, _, _, beat in rows:
        print(f"| {name} | {beat * 1000:.1f} |")
    print()
    print("| transport | claims | `claim list` cold (one fetch) | warm |")
    print("| --- | --- | --- | --- |")
    for name, cold, warm, count in list_rows:
        print(f"| {name} | {count} | {cold * 1000:.0f} | {warm * 1000:.0f} |")


if __name__ == "__main__":
    main()
