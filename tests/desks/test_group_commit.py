"""Group commit end to end: desks on one host push through one group (``assay.forge.group``).

Real ``assay desk run`` processes on one machine (one ``ASSAY_STATE``: one host), a real
embedded forge whose pre-receive hook logs every push (its time and ref lines), scripted
models answering each call after a short delay.

- Ten desks in ``window`` mode push at most once a window between them while they all
  work: each push carries every desk's pending checkpoint.
- A desk paused while its unit waits in the spool loses its claim to another machine; the
  next round carries its stale unit with the others', the forge refuses that round, the
  zombie's unit is answered alone, the others' land, and the zombie stops (exit 4) without
  writing anything over the new holder's.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.desks.world import World, brief_text, finish, wait_until, write
from tests.torture.held_push import HeldPush

ZERO = "0" * 40
WINDOW_S = 1.0
CALLS = 10  # each desk's conversation: a call every 0.3 s or so, a few windows long


def timed_pushes(forge_path: Path) -> Path:
    """A pre-receive hook writing one JSON line per push: its time and its ref lines."""
    log = forge_path.parent / "timed-pushes.log"
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text(
        "#!/usr/bin/env python3\nimport json, sys, time\n"
        "lines = [l.split() for l in sys.stdin.read().splitlines() if l.strip()]\n"
        f"open({str(log)!r}, 'a').write(json.dumps([time.time(), lines]) + '\\n')\n",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    return log


def read_pushes(log: Path) -> list[tuple[float, list[list[str]]]]:
    """(time, [[old, new, ref], ...]) of each push, in order."""
    lines = log.read_text(encoding="utf-8").splitlines()
    return [(float(t), refs) for t, refs in map(json.loads, lines)]


def slow_script(calls: int, delay_s: float) -> list[dict[str, Any]]:
    steps = [dict(write(f"f{n}.txt", f"{n}\n"), delay_s=delay_s) for n in range(calls)]
    return [*steps, finish("written")]


def finished_at(world: World, brief: str) -> float:
    """When the brief's run called ``finish`` (the journal's wall clock)."""
    for entry in world.journal(brief).entries:
        if entry.get("name") == "finish" and entry.get("t0"):
            return datetime.fromisoformat(str(entry["t0"]).replace("Z", "+00:00")).timestamp()
    raise AssertionError(f"{brief}: no finish in the journal")


@pytest.mark.slow
def test_ten_desks_on_one_host_push_at_most_once_a_window_between_them(world: World) -> None:
    briefs = [f"b{n}" for n in range(10)]
    log = timed_pushes(world.forge_path)
    world.add_briefs(*(brief_text(b) for b in briefs))
    # A lease long enough that no renewal falls in the run: these pushes are checkpoints.
    script = slow_script(CALLS, 0.3)
    world.add_desk(
        "coder", script, lease=300, durability="window", checkpoint_window=f"{WINDOW_S}s"
    )
    procs = [world.start(*world.desk_args("coder", "--once", "--brief", b)) for b in briefs]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    for brief in briefs:
        review = world.review(brief)
        assert review is not None and review.state == "ready"
        assert {f"f{n}.txt" for n in range(CALLS)} <= set(world.tree(brief))

    pushes = read_pushes(log)
    claimed = [
        t
        for t, lines in pushes
        if any(o == ZERO and r.startswith("refs/assay/claims/") for o, _, r in lines)
    ]
    start, end = max(claimed), min(finished_at(world, b) for b in briefs)
    assert end - start > 2 * WINDOW_S, "every desk worked together for a few windows"
    steady = [(t, lines) for t, lines in pushes if start < t < end]
    # Without the group each desk pushed once a window: ten a window. With it, one: pushes
    # land at least a window apart (a desk's window counts from the host's last push), and
    # the hook that times them runs up to a push's latency before its landing, which on a
    # loaded machine lets two of them fall a little closer than a window.
    windows = (end - start) / WINDOW_S
    assert len(steady) <= 1.5 * windows + 1, [round(t - start, 2) for t, _ in steady]
    carried = [
        len({r for _, _, r in lines if r.startswith("refs/assay/journal/")}) for _, lines in steady
    ]
    assert carried and max(carried) >= 5, carried  # one push, many desks' checkpoints


def unit_file(world: World, brief: str, machine: str = "a") -> Path | None:
    claim = world.claim(brief)
    assert claim is not None
    key = hashlib.sha256(f"{brief}\0{claim.holder}\0{claim.fence}".encode()).hexdigest()[:32]
    found = list((world.root / f"machine-{machine}").glob(f"cache/*.group-*/units/{key}.json"))
    return found[0] if found else None


def waits_unpushed(world: World, brief: str) -> bool:
    """The brief's unit in the spool offers commits no round has taken yet."""
    path = unit_file(world, brief)
    if path is None:
        return False
    try:
        unit = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    moving = any(r["base"] != r["want"] for r in unit["refs"] if "journal" in r["ref"])
    # Offered again since a round took it (or none has): commits no round carries yet.
    return moving and (unit["flight"] is None or unit["seq"] > unit["flight"])


@pytest.mark.slow
def test_a_zombie_refused_mid_group_costs_the_others_nothing(world: World) -> None:
    briefs = ["b0", "b1", "b2"]
    world.add_briefs(*(brief_text(b) for b in briefs))
    world.add_desk(
        "coder",
        slow_script(12, 0.3),
        lease=3,
        durability="window",
        checkpoint_window="1s",
        takes={"ids": ["b1", "b2"]},
    )
    # The zombie-to-be runs longer than the others, so that it still makes commits while
    # the round carrying b1 is held, however late the load lets that round start.
    world.add_desk(
        "coder-b0",
        slow_script(36, 0.3),
        lease=3,
        durability="window",
        checkpoint_window="1s",
        takes={"ids": ["b0"]},
    )
    held = HeldPush.install(
        world.forge_path, stage="pre-receive", match="refs/assay/journal/b1", unless=None
    )
    desks = {"b0": "coder-b0", "b1": "coder", "b2": "coder"}
    procs = {b: world.start(*world.desk_args(desks[b], "--once", "--brief", b)) for b in briefs}
    zombie = procs.pop("b0")
    try:
        wait_until(lambda: world.branch_tip("b1") is not None, timeout=120, what="b1 pushed")
        held.arm(1)  # the next round carrying b1 is held: no round of this host goes on
        held.wait_held()
        wait_until(lambda: waits_unpushed(world, "b0"), timeout=60, what="b0's unit waiting")
        os.killpg(zombie.pid, signal.SIGSTOP)  # paused with its checkpoint in the spool
        try:
            wait_until(lambda: world.claim_expired("b0"), timeout=60, what="b0's lease lapsed")
            other = world.desk("coder-b0", "--once", "--brief", "b0", machine="b")
            assert other.returncode == 0, other.stderr
            tip = world.branch_tip("b0")
            held.release()  # this host's rounds go on: the zombie's unit is in them
        finally:
            os.killpg(zombie.pid, signal.SIGCONT)
        _, err = zombie.communicate(timeout=120)
        assert zombie.returncode == 4, err
        for brief, proc in procs.items():
            _, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, f"{brief}: {err}"
    finally:
        held.release()
    # Nothing of the zombie landed over the new holder's work, and its claim is the new
    # holder's alone, done.
    assert world.branch_tip("b0") == tip
    claim = world.claim("b0")
    assert claim is not None and (claim.state, claim.fence) == ("done", 2)
    fences = [e["fence"] for e in world.journal("b0").entries]
    assert fences == sorted(fences) and fences[-1] == 2
    # Nothing lost for the others: each finished from its own checkpoints, all files there.
    for brief in procs:
        record = world.claim(brief)
        assert record is not None and (record.state, record.fence) == ("done", 1)
        assert {f"f{n}.txt" for n in range(12)} <= set(world.tree(brief))
