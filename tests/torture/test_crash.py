"""Crash torture: SIGKILL desk processes at seeded random instants across a multi-desk run
on the served embedded forge, then check every promise.

A baseline brief is run first without any kill (the uncrashed run). Then desk processes
are kept running on a pool of machines (so some resumes use a machine's local journal and
some start from the forge alone) while a seeded schedule SIGKILLs one of them every few
hundred milliseconds; when every brief is finished and kills remain to be made, a new wave
of briefs lands on main. Afterwards, with no more kills, desks drain what is left (killed
holders' leases expire: 3 s, no skew). Then, for every brief: claim done and review ready
(merged or resumable: nothing is left half-held), exactly one ``start`` entry and fences
that never go backwards (no double claim), as many recorded model calls as the script has
answers with no position recorded twice (no repaid model call), every journal chain valid
(on the forge and in every machine's local write-ahead journal), and the work files equal
to the uncrashed run's.

Short version (CI): about a dozen kills. ``ASSAY_TORTURE=full``: at least 200.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from assay.errors import AssayError
from assay.journal import read_journal
from tests.forge_fixtures import put_on_main, wait_until
from tests.torture.conftest import SEED, pick
from tests.torture.fleet import Fleet, brief_text, invariant_problems

SECRET = "tortureSecret-7c1f9a2e-do-not-leak"


def work_files(tree: dict[str, str]) -> dict[str, str]:
    return {p: sha for p, sha in tree.items() if not p.startswith("briefs/")}


def drain(fleet: Fleet, *, timeout: float) -> None:
    """Run desks without kills until every brief is finished (waiting out dead leases)."""
    deadline = time.monotonic() + timeout
    while True:
        for _ in range(2):
            fleet.start_desk(machine=f"drain-{fleet.counter % 2}")
        fleet.wait_all(timeout=max(deadline - time.monotonic(), 1))
        if fleet.all_done():
            return
        assert time.monotonic() < deadline, {
            b: (r.claim_state, r.fence)
            for b, r in fleet.inspect().items()
            if r.claim_state != "done"
        }
        wait_until(  # a killed holder's lease (3 s) runs out before the next pass
            fleet.leases_run_out,
            timeout=max(deadline - time.monotonic(), 1),
            interval=0.2,
            what="killed holders' leases to run out",
        )


def local_journal_problems(root: Path) -> list[str]:
    """Every machine's local journals: a chain may end in a torn line, never be broken."""
    problems = []
    for directory in sorted(root.glob("machine-*/work/coder/*/.assay/journal/*")):
        if not any(directory.glob("*.jsonl")):
            continue
        try:
            read_journal(directory)
        except AssayError as error:
            problems.append(f"{directory}: {error}")
    return problems


@pytest.mark.slow
def test_sigkill_torture_keeps_every_promise(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    kills_wanted = pick(10, 200)
    desks_alive = pick(2, 4)
    wave = pick(4, 12)
    fleet = Fleet(tmp_path / "fleet", ["ref"], lease=3, delay_s=0.05, secret=SECRET)
    fleet.setup()
    fleet.serve()
    try:
        fleet.start_desk("--once", "--brief", "ref", machine="baseline")
        fleet.wait_all(timeout=120)
        baseline = work_files(fleet.inspect()["ref"].tree)
        assert {"alpha.txt", "beta.txt"} <= set(baseline)

        kills = waves = 0
        machines = [f"pool-{i}" for i in range(desks_alive + 2)]
        deadline = time.monotonic() + pick(60, 1800)
        while kills < kills_wanted:
            assert time.monotonic() < deadline, f"seed {SEED}: only {kills} kills made"
            if waves == 0 or fleet.all_done():  # nothing left to interrupt: a new wave
                names = [f"w{waves}-{i}" for i in range(wave)]
                put_on_main(fleet.forge_path, {f"briefs/{b}.md": brief_text(b) for b in names})
                fleet.briefs += names
                waves += 1
            while len(fleet.reap()) < desks_alive:
                fleet.start_desk(machine=rng.choice(machines))
            time.sleep(rng.uniform(0.2, 1.2))  # the random instant (seeded) of the next kill
            alive = fleet.reap()
            if alive:
                fleet.kill(rng.choice(alive))
                kills += 1
        for desk in fleet.reap():
            fleet.kill(desk)
            kills += 1

        drain(fleet, timeout=pick(90, 900))
        results = fleet.inspect()
        problems = invariant_problems(fleet, results)
        problems += local_journal_problems(fleet.root)
        for brief, result in results.items():
            if work_files(result.tree) != baseline:
                problems.append(f"{brief}: work files differ from the uncrashed run's")
        assert not problems, f"seed {SEED}, {kills} kills, {waves} waves:\n" + "\n".join(problems)
        assert kills >= kills_wanted
        changed_hands = sum(r.fence > 1 for r in results.values())
        print(
            f"seed {SEED}: {kills} SIGKILLs, {waves} waves, {len(results)} briefs, "
            f"{changed_hands} changed holder, all invariants held"
        )
        assert changed_hands >= 1, "no kill interrupted a holder"

        # Secrets: nothing the torture run wrote holds the secret (scanned after the run).
        from tests.torture.scan import scan_for_secret

        assert scan_for_secret(fleet.root, SECRET) == []
    finally:
        fleet.stop()
