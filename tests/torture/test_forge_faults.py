"""Forge faults: the smart-HTTP server killed and restarted mid-push, connections reset by a
proxy, the forge's disk full. Desks may stop (exit 69 unavailable, or the push refusal's
code), but nothing beyond the documented durability point is lost: re-run, every brief
finishes with every invariant of the crash torture holding, and the forge's repository
passes ``git fsck``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest

from tests.forge_fixtures import wait_until
from tests.torture.conftest import SEED, pick
from tests.torture.fleet import Fleet, invariant_problems
from tests.torture.proxy import ResettingProxy

ONE_LINE_ERROR = {"code", "message", "status"}
STOPS = {4, 69}  # fenced, or unavailable (a full forge disk included)


def finish_all(fleet: Fleet, *, url: str | None = None, timeout: float = 120) -> None:
    """Re-run desks (same machines first) until every brief is done, leases permitting."""
    deadline = time.monotonic() + timeout
    while True:
        fleet.start_desk(machine="a", url=url)
        fleet.wait_all(timeout=max(deadline - time.monotonic(), 1))
        results = fleet.inspect()
        if all(r.claim_state == "done" for r in results.values()):
            return
        assert time.monotonic() < deadline, {b: r.claim_state for b, r in results.items()}
        wait_until(  # a dead holder's short lease runs out before the next pass
            fleet.leases_run_out,
            timeout=max(deadline - time.monotonic(), 1),
            interval=0.2,
            what="dead holders' leases to run out",
        )


def fsck(fleet: Fleet) -> None:
    done = subprocess.run(
        ["git", f"--git-dir={fleet.forge_path}", "fsck", "--no-dangling"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def stopped_cleanly(fleet: Fleet) -> None:
    """Every desk that stopped on a fault said why in one JSON line (no traceback)."""
    for desk in fleet.desks:
        text = desk.log.read_text(encoding="utf-8", errors="replace")
        assert "Traceback" not in text, text
        if desk.code not in (0, 3) and not desk.killed:
            last = json.loads(text.strip().splitlines()[-1])
            if "runs" in last:  # a run report: each run says how it stopped
                assert {r["code"] for r in last["runs"]} <= STOPS | {0}, text
            else:  # a one-line error
                assert set(last) >= ONE_LINE_ERROR, text
                assert last["code"] in STOPS, text


@pytest.mark.slow
def test_server_killed_and_restarted_mid_push(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    fleet = Fleet(tmp_path, [f"k{i}" for i in range(pick(2, 12))], lease=3, delay_s=0.05)
    fleet.setup()
    fleet.serve()
    try:
        fleet.start_desk(machine="a")
        fleet.start_desk(machine="b")
        outages = 0
        for _ in range(pick(3, 40)):
            if not fleet.reap():
                break
            time.sleep(rng.uniform(0.2, 1.0))  # the seeded instant: likely inside a push
            fleet.kill_server()
            outages += 1
            time.sleep(rng.uniform(0.1, 1.5))  # an outage shorter or longer than the retries
            fleet.serve()
        assert outages >= 1
        fleet.wait_all(timeout=120)
        stopped_cleanly(fleet)
        finish_all(fleet)
        problems = invariant_problems(fleet, fleet.inspect())
        assert not problems, f"seed {SEED}, {outages} outages:\n" + "\n".join(problems)
        fsck(fleet)
    finally:
        fleet.stop()


def test_connections_reset_by_a_proxy(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, [f"r{i}" for i in range(pick(2, 12))], lease=3)
    fleet.setup()
    fleet.serve()
    try:
        with ResettingProxy(fleet.port, reset_rate=0.25, seed=SEED) as proxy:
            url = f"http://127.0.0.1:{proxy.port}/{fleet.forge_path.name}"
            for machine in ("a", "b"):
                fleet.start_desk(machine=machine, url=url)
            fleet.wait_all(timeout=180)
            stopped_cleanly(fleet)
            # Keep going through the faulty network until all is done.
            finish_all(fleet, url=url, timeout=180)
            assert proxy.resets >= 1, f"{proxy.connections} connections, none reset"
        problems = invariant_problems(fleet, fleet.inspect())
        assert not problems, f"seed {SEED}, {proxy.resets} resets:\n" + "\n".join(problems)
        fsck(fleet)
    finally:
        fleet.stop()


def mount_small_disk(where: Path, size: str = "6m") -> bool:
    """A small tmpfs at ``where``; False when this machine does not allow it (not root), or
    when ``ASSAY_TORTURE_NO_MOUNT=1`` asks for the fallback."""
    where.mkdir()
    if os.environ.get("ASSAY_TORTURE_NO_MOUNT") == "1":
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    return done.returncode == 0


def fill(disk: Path, leave: int) -> Path:
    filler = disk / "filler"
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize + (filler.stat().st_size if filler.exists() else 0)
    filler.write_bytes(b"\0" * max(free - leave, 0))
    return filler


def test_forge_disk_full_then_freed(tmp_path: Path) -> None:
    """On a 6 MiB tmpfs filled to within a few KiB (root). Where mounting is not allowed,
    the forge server runs with RLIMIT_FSIZE capped instead: git on the forge cannot write
    what is pushed, the closest a non-root process gets to a full disk."""
    disk = tmp_path / "small"
    mounted = mount_small_disk(disk)
    fleet = Fleet(tmp_path / "fleet", ["d0", "d1"], lease=3, forge_dir=disk)
    try:
        fleet.setup()
        fleet.serve()
        refused = 0
        for leave in (8 << 10, 96 << 10, 256 << 10)[: pick(1, 3)]:
            if mounted:
                filler: Path | None = fill(disk, leave)
            else:
                fleet.kill_server()
                fleet.serve(max_file_bytes=leave // 8)
                filler = None
            desk = fleet.start_desk(machine="a")
            fleet.wait_all(timeout=120)
            refused += desk.code not in (0, 3)
            stopped_cleanly(fleet)
            fsck(fleet)
            if filler is not None:
                filler.unlink()
            else:
                fleet.kill_server()
                fleet.serve()
        assert refused >= 1, "the full disk never refused a push"
        finish_all(fleet)
        problems = invariant_problems(fleet, fleet.inspect())
        assert not problems, "\n".join(problems)
        fsck(fleet)
    finally:
        fleet.stop()
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)
