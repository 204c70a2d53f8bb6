"""SIGKILL a desk at three points and resume it on another machine (another cache and work
tree): during a model call, between a tool step and its commit, during a push.

The run finishes with exactly the branch tree of an uncrashed run, and no model call is
paid twice: with the OpenAI-compatible server, the completions it answered equal the model
steps in the journals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.desks.world import (
    HoldingServer,
    World,
    brief_text,
    finish,
    model_steps,
    wait_until,
    write,
)

FILES = ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]
RESPONSES = [write(name, f"{name} content\n") for name in FILES] + [finish("all written")]


def end_push_gate(forge_path: Path) -> tuple[Path, Path]:
    """A pre-receive hook holding the push of the run's end, then refusing it.

    (Tool steps are group-committed with the next model step, and a model step's push is
    the one thing a crash may not lose without paying for the call again; the end's push
    carries the last tool step, the claimed evidence and the end.)"""
    control = forge_path.parent / "push-gate"
    control.mkdir()
    arrived, release, used = control / "arrived", control / "release", control / "used"
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text(
        f"""#!/usr/bin/env python3
import os, subprocess, sys, time
for line in sys.stdin.read().splitlines():
    old, new, ref = line.split()
    # The checkpoint's line: the journal ref (the branch moves only when code changed).
    if not ref.startswith("refs/assay/journal/") or os.path.exists({str(used)!r}):
        continue
    subject = subprocess.run(["git", "log", "-1", "--format=%s", new],
                             capture_output=True, text=True).stdout.strip()
    if subject.endswith(": end"):
        open({str(used)!r}, "w").close()
        open({str(arrived)!r}, "w").close()
        while not os.path.exists({str(release)!r}):
            time.sleep(0.02)
        sys.exit(1)
""",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    return arrived, release


def ok_tools(world: World, machine: str) -> int:
    return sum(
        1
        for e in world.wal(machine, "coder", "b1")
        if e.get("kind") == "step" and e.get("step") == "tool" and e.get("status") == "ok"
    )


def model_intents(world: World, machine: str) -> int:
    return sum(
        1
        for e in world.wal(machine, "coder", "b1")
        if e.get("kind") == "step" and e.get("step") == "model" and e.get("status") == "started"
    )


def crash_three_times(
    world: World,
    *,
    during_model_call: Callable[[subprocess.Popen[str]], None],
    before_resume: Callable[[], None] = lambda: None,
    after_third_tool: Callable[[], None] = lambda: None,
    after_second_kill: Callable[[], None] = lambda: None,
) -> None:
    """Kill the desk at the three points, each time resuming on a new machine.

    ``after_third_tool`` lets a model server hold the next call, so the second kill cannot
    land just after a completion was answered but before it was recorded (a call that
    must, by design, be paid again on resume)."""
    # 1. During a model call (the second one).
    first = world.start_desk("coder", "--once", "--brief", "b1", machine="a")
    during_model_call(first)
    world.kill(first)
    before_resume()
    wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")

    # 2. Between a tool step and its commit: its result is in the local journal only
    #    (tool steps ride along with the next model step's push).
    second = world.start_desk("coder", "--once", "--brief", "b1", machine="b")
    wait_until(lambda: ok_tools(world, "b") >= 3, timeout=60, what="a third tool step")
    after_third_tool()
    world.kill(second)
    after_second_kill()
    wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")

    # 3. During a push: the hook holds the push, the desk dies, the push is refused.
    arrived, release = end_push_gate(world.forge_path)
    third = world.start_desk("coder", "--once", "--brief", "b1", machine="c")
    wait_until(arrived.exists, timeout=60, what="the end's push to reach the forge")
    world.kill(third)
    release.touch()
    wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")

    # A fourth machine finishes the run from the forge alone.
    last = world.desk("coder", "--once", "--brief", "b1", "--json", machine="d")
    assert last.returncode == 0, last.stderr
    assert json.loads(last.stdout)["runs"][0]["review"] == "ready"
    baseline = world.desk("coder", "--once", "--brief", "ref", machine="e")
    assert baseline.returncode == 0, baseline.stderr


def assert_same_result(world: World) -> None:
    assert world.tree("b1") == world.tree("ref")
    assert {f"{name}" for name in FILES} <= set(world.tree("b1"))
    journal = world.journal("b1")
    assert model_steps(journal) == len(RESPONSES)
    fences = [e["fence"] for e in journal.entries if e["kind"] == "takeover"]
    # Each holder that pushed anything wrote its takeover first; the last holder is fence 4.
    assert fences == sorted(set(fences)) and fences[-1] == 4 and len(fences) >= 3
    claim = world.claim("b1")
    assert claim is not None and claim.state == "done" and claim.fence == 4


def add_work(world: World, model: dict[str, Any] | None = None) -> None:
    world.add_briefs(brief_text("b1"), brief_text("ref"))
    world.add_desk("coder", RESPONSES, lease=2, model=model)


@pytest.mark.slow
def test_scripted_desk_survives_three_kills(world: World) -> None:
    slow = [dict(r) for r in RESPONSES]
    slow[1]["delay_s"] = 120  # the second model call hangs until the desk is killed
    add_work(world)
    script = world.desks / "scripts" / "coder.json"
    script.write_text(json.dumps({"responses": slow}), encoding="utf-8")

    def in_model_call(proc: subprocess.Popen[str]) -> None:
        wait_until(lambda: model_intents(world, "a") >= 2, timeout=60, what="a model call")

    def fast_again() -> None:
        script.write_text(json.dumps({"responses": RESPONSES}), encoding="utf-8")

    crash_three_times(world, during_model_call=in_model_call, before_resume=fast_again)
    assert_same_result(world)


@pytest.mark.slow
def test_openai_desk_survives_three_kills_and_pays_each_call_once(world: World) -> None:
    # Turn 1 is held for the first kill; turn 3 (the call after the third tool step) for
    # the second, so no completion is answered to a process about to die.
    with HoldingServer(RESPONSES, hold_turns={1, 3}) as server:
        add_work(world, model=server.desk_model())

        def in_model_call(proc: subprocess.Popen[str]) -> None:
            server.wait_held(1)

        crash_three_times(
            world,
            during_model_call=in_model_call,
            before_resume=server.abandon,
            after_third_tool=lambda: server.wait_held(3),
            after_second_kill=server.abandon,
        )
        assert_same_result(world)
        paid = model_steps(world.journal("b1")) + model_steps(world.journal("ref"))
        assert server.count == paid


@pytest.mark.slow
def test_a_paused_zombie_desk_is_fenced_and_writes_nothing(world: World) -> None:
    slow = [dict(r) for r in RESPONSES]
    slow[1]["delay_s"] = 3  # the second model call takes a while: the zombie sleeps in it
    world.add_briefs(brief_text("b1"))
    world.add_desk("coder", slow, lease=2)
    zombie = world.start_desk("coder", "--once", "--brief", "b1", machine="a")
    wait_until(lambda: model_intents(world, "a") >= 2, timeout=60, what="a model call")
    os.killpg(zombie.pid, signal.SIGSTOP)  # a paused process: GC pause, laptop lid, VM freeze
    try:
        wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")
        # Same machine, same work root: the zombie still holds its work directory, so the
        # new holder works in one of its own.
        done = world.desk("coder", "--once", "--brief", "b1", machine="a")
        assert done.returncode == 0, done.stderr
        work = world.root / "machine-a" / "work" / "coder"
        assert [p.name for p in work.glob("b1.*") if p.is_dir()]
        tip, review = world.branch_tip("b1"), world.review("b1")
    finally:
        os.killpg(zombie.pid, signal.SIGCONT)
    _, stderr = zombie.communicate(timeout=120)
    assert zombie.returncode == 4, stderr
    # The zombie wrote nothing after it woke: branch, review and claim are the new holder's.
    assert world.branch_tip("b1") == tip
    assert world.review("b1") == review
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.fence) == ("done", 2)
