"""Durability modes (``durability: step | window | exit``), end to end with real SIGKILLs.

A scripted agent desk writes eight files (nine model calls); the sixth call hangs until
the desk is killed. Every model call the scripted model answers is logged
(``ASSAY_MODEL_CALL_LOG``), so a call paid twice is a (brief, turn) logged twice. Pushes
are counted by a pre-receive hook on the embedded forge.

- With the work directory kept (a restart on the same machine), no call is paid twice in
  any mode: the desk resumes from its local commits, ahead of the forge.
- With it deleted (the machine lost), the calls since the last forge checkpoint are paid
  again, exactly as many as the claim's last renewal reported, and ``assay history`` says so.
"""

from __future__ import annotations

import fcntl
import functools
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from assay.desks import parse_manifest
from assay.desks.host.durability import Durability
from assay.errors import BadInput
from assay.forge import open_forge
from tests.desks.world import (
    World,
    brief_text,
    count_pushes,
    finish,
    model_steps,
    wait_until,
    write,
)

FILES = [f"f{n}.txt" for n in range(8)]
RESPONSES = [write(name, f"{name}\n") for name in FILES] + [finish("all written")]
HUNG = 5  # the sixth call (turn 5) hangs: five calls were answered before the kill


def pushes(log: Path, brief: str) -> int:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return sum(1 for line in lines if any(ref.endswith(f"/{brief}") for ref in line.split()))


def calls(log: Path, brief: str) -> Counter[int]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return Counter(json.loads(line)["turn"] for line in lines if json.loads(line)["brief"] == brief)


def script(world: World, *, hang: bool) -> None:
    responses: list[dict[str, Any]] = [dict(r) for r in RESPONSES]
    if hang:
        responses[HUNG]["delay_s"] = 120  # until the desk is killed
    path = world.desks / "scripts" / "coder.json"
    path.write_text(json.dumps({"responses": responses}), encoding="utf-8")


def desk_with(world: World, mode: str, *, lease: float = 2, **extra: Any) -> None:
    world.add_desk("coder", RESPONSES, lease=lease, durability=mode, **extra)


def forge_calls(world: World, brief: str) -> int:
    """Model calls in the journal of the forge's branch tip (0 when nothing was pushed)."""
    return model_steps(world.journal(brief)) if world.branch_tip(brief) else 0


def history_json(world: World, brief: str) -> list[dict[str, Any]]:
    done = world.assay("history", "--brief", brief, "--forge", world.url, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def kill_in_sixth_call(world: World, brief: str, call_log: Path) -> int:
    """Start the desk on ``brief``, kill it in its sixth call once its claim's renewal has
    reported the five answered calls; return the model calls the forge's checkpoint holds."""
    script(world, hang=True)
    extra = {"ASSAY_MODEL_CALL_LOG": str(call_log)}
    proc = world.start(*world.desk_args("coder", "--once", "--brief", brief), extra=extra)
    wait_until(
        lambda: sum(calls(call_log, brief).values()) == HUNG,
        timeout=120,
        what="five answered model calls",
    )

    def reported() -> bool:
        claim = world.claim(brief)
        return claim is not None and claim.calls == HUNG

    wait_until(reported, timeout=60, what="a claim renewal reporting five calls")
    world.kill(proc)
    checkpoint = forge_calls(world, brief)
    wait_until(lambda: world.claim_expired(brief), timeout=60, what="the lease to expire")
    script(world, hang=False)
    return checkpoint


def resume(world: World, brief: str, call_log: Path) -> None:
    extra = {"ASSAY_MODEL_CALL_LOG": str(call_log)}
    done = world.assay(*world.desk_args("coder", "--once", "--brief", brief, "--json"), extra=extra)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"][0]["review"] == "ready"
    assert model_steps(world.journal(brief)) == len(RESPONSES)
    assert set(FILES) <= set(world.tree(brief))


# Pushed before the kill: step mode every model call; window mode (30 s) what the lease
# renewal reporting the five calls carried (a renewal rides with the local checkpoint: the
# push costs the same); exit mode nothing (a renewal carries only the claim).
CHECKPOINT = {"step": HUNG, "window": HUNG, "exit": 0}


@pytest.mark.parametrize("mode", ["step", "window", "exit"])
def test_a_restart_on_the_same_machine_pays_no_call_twice(world: World, mode: str) -> None:
    world.add_briefs(brief_text("b1"))
    desk_with(world, mode, checkpoint_window="30s")
    call_log = world.root / "calls.log"
    checkpoint = kill_in_sixth_call(world, "b1", call_log)
    assert checkpoint == CHECKPOINT[mode]
    resume(world, "b1", call_log)
    answered = calls(call_log, "b1")
    assert sorted(answered) == list(range(len(RESPONSES)))
    assert max(answered.values()) == 1, f"{mode}: a call was paid twice: {answered}"
    history = history_json(world, "b1")
    assert not any(e.get("repaid") for e in history)
    start = next(e for e in history if e["kind"] == "start")
    assert start["durability"]["mode"] == mode


@pytest.mark.parametrize("mode", ["step", "window", "exit"])
def test_a_lost_machine_repays_the_calls_since_the_forge_checkpoint(
    world: World, mode: str
) -> None:
    world.add_briefs(brief_text("b1"))
    desk_with(world, mode, checkpoint_window="30s")
    call_log = world.root / "calls.log"
    checkpoint = kill_in_sixth_call(world, "b1", call_log)
    assert checkpoint == CHECKPOINT[mode]
    shutil.rmtree(world.root / "machine-a" / "work" / "coder" / "b1")  # the machine is lost
    resume(world, "b1", call_log)
    answered = calls(call_log, "b1")
    repaid = sum(answered.values()) - len(RESPONSES)
    assert repaid == HUNG - checkpoint  # exactly the calls since the last forge checkpoint
    expected = {turn: 2 if checkpoint <= turn < HUNG else 1 for turn in range(len(RESPONSES))}
    assert dict(answered) == expected
    history = history_json(world, "b1")
    assert sum(e.get("repaid", 0) for e in history if e["kind"] == "takeover") == repaid
    table = world.assay("history", "--brief", "b1", "--forge", world.url)
    assert table.returncode == 0, table.stderr
    if repaid:
        assert f"{repaid} model call(s) paid again" in table.stdout
    else:
        assert "paid again" not in table.stdout
    # The board's read of the forge says it too: status --json per brief and in all.
    status = world.assay("status", "--forge", world.url, "--json")
    assert status.returncode == 0, status.stderr
    said = json.loads(status.stdout)
    [row] = [row for row in said["briefs"] if row["id"] == "b1"]
    assert row["repaid_model_calls"] == repaid == said["totals"]["repaid_model_calls"]
    shown = world.assay("status", "--forge", world.url)
    assert (f"{repaid} model call(s) paid again" in shown.stdout) == bool(repaid)
    # And the board, Markdown and HTML alike, beside the brief's model calls.
    drawn = world.assay("board", "--forge", world.url, "--out", str(world.root / "BOARD.md"))
    assert drawn.returncode == 0, drawn.stderr
    for page in ("BOARD.md", "board.html"):
        text = (world.root / page).read_text(encoding="utf-8")
        assert (f"+{repaid} repaid" in text) == bool(repaid), page


def test_window_mode_pushes_an_unpushed_commit_after_one_window(world: World) -> None:
    """The window's own push: a step never waits longer than the window for the forge, so
    a machine lost while a call hangs costs nothing already a window old."""
    world.add_briefs(brief_text("b1"))
    desk_with(world, "window", checkpoint_window="1s")
    call_log = world.root / "calls.log"
    script(world, hang=True)
    extra = {"ASSAY_MODEL_CALL_LOG": str(call_log)}
    proc = world.start(*world.desk_args("coder", "--once", "--brief", "b1"), extra=extra)
    wait_until(
        lambda: world.branch_tip("b1") and forge_calls(world, "b1") == HUNG,
        timeout=120,
        what="the window's push of the five answered calls",
    )
    world.kill(proc)
    wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")
    shutil.rmtree(world.root / "machine-a" / "work" / "coder" / "b1")
    script(world, hang=False)
    resume(world, "b1", call_log)
    assert max(calls(call_log, "b1").values()) == 1


@pytest.mark.parametrize(("mode", "most", "branch"), [("window", 4, 2), ("exit", 3, 1)])
def test_pushes_per_brief_stay_within_the_mode(
    world: World, mode: str, most: int, branch: int
) -> None:
    """The claim, the branch (window: at ``finish`` and the end; exit: the end), and the
    claim settled with the review. A lease long enough that no renewal falls in the run:
    renewals are the lease's pushes, not the mode's."""
    log = count_pushes(world.forge_path)
    world.add_briefs(brief_text("b1"))
    desk_with(world, mode, lease=300)
    resume(world, "b1", world.root / "calls.log")
    assert pushes(log, "b1") <= most
    lines = log.read_text(encoding="utf-8").splitlines()
    assert sum(1 for line in lines if "refs/heads/assay/b1" in line.split()) == branch


def test_step_mode_pushes_every_model_call(world: World) -> None:
    log = count_pushes(world.forge_path)
    world.add_briefs(brief_text("b1"))
    desk_with(world, "step", lease=300)
    resume(world, "b1", world.root / "calls.log")
    assert pushes(log, "b1") >= len(RESPONSES)


@pytest.mark.parametrize("window", ["30s", "1s"])
def test_a_window_zombie_that_lost_its_claim_pushes_nothing(world: World, window: str) -> None:
    """Fencing in window mode: the desk's unpushed local commits never land over a newer
    holder's branch; the CAS on the tip it last pushed refuses them, and the window's own
    push (1 s: due the moment the process wakes) reads the claim first."""
    import os
    import signal

    world.add_briefs(brief_text("b1"))
    desk_with(world, "window", checkpoint_window=window)
    slow = [dict(r) for r in RESPONSES]
    slow[HUNG]["delay_s"] = 3  # the zombie sleeps in this call
    (world.desks / "scripts" / "coder.json").write_text(json.dumps({"responses": slow}))
    call_log = world.root / "calls.log"
    extra = {"ASSAY_MODEL_CALL_LOG": str(call_log)}
    zombie = world.start(*world.desk_args("coder", "--once", "--brief", "b1"), extra=extra)
    wait_until(lambda: sum(calls(call_log, "b1").values()) == HUNG, timeout=120, what="5 calls")
    os.killpg(zombie.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")
        script(world, hang=False)
        resume_other = world.desk("coder", "--once", "--brief", "b1", machine="b")
        assert resume_other.returncode == 0, resume_other.stderr
        tip = world.branch_tip("b1")
    finally:
        os.killpg(zombie.pid, signal.SIGCONT)
    _, stderr = zombie.communicate(timeout=120)
    assert zombie.returncode == 4, stderr
    assert world.branch_tip("b1") == tip
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.fence) == ("done", 2)


def test_the_manifest_fields_are_checked(tmp_path: Path) -> None:
    base = "name: coder\nkind: python\nentry: m:f\n"
    with pytest.raises(BadInput) as bad:
        parse_manifest(base + "durability: always\n", source="desks/coder.yaml")
    assert "desks/coder.yaml" in bad.value.message and "durability" in bad.value.message
    with pytest.raises(BadInput) as bad:
        parse_manifest(base + "checkpoint_window: soon\n", source="desks/coder.yaml")
    assert "desks/coder.yaml" in bad.value.message and "checkpoint_window" in bad.value.message
    with pytest.raises(BadInput):
        parse_manifest(base + "checkpoint_window: 0s\n", source="desks/coder.yaml")
    desk = parse_manifest(base + "durability: window\ncheckpoint_window: 2m\n", source="coder.yaml")
    assert (desk.durability, desk.checkpoint_window) == ("window", 120.0)


def test_the_default_mode_is_the_forges(tmp_path: Path, forge_path: Path) -> None:
    from assay.github.forge import GitHubForge

    desk = parse_manifest("name: coder\nkind: python\nentry: m:f\n", source="coder.yaml")
    with open_forge(str(forge_path), cache_dir=tmp_path / "cache") as forge:
        assert Durability.for_desk(desk, forge).mode == "step"
    assert GitHubForge.default_durability == "window"
    chosen = parse_manifest(
        "name: coder\nkind: python\nentry: m:f\ndurability: exit\n", source="coder.yaml"
    )
    assert Durability.for_desk(chosen, GitHubForge.__new__(GitHubForge)).mode == "exit"
    assert Durability.for_desk(desk, GitHubForge.__new__(GitHubForge)).mode == "window"


@pytest.mark.parametrize("bad", [-1, True, "3", 1.5, 2**53 + 1])
def test_a_claim_records_calls_only_as_a_bounded_count(bad: object) -> None:
    from assay.claims.record import ClaimRecord, format_time, now_utc, validate

    stamp = format_time(now_utc())
    record = ClaimRecord(
        brief="b1",
        desk="coder",
        holder="h",
        fence=1,
        state="held",
        since=stamp,
        renewed_at=stamp,
        lease_s=60,
    )
    assert "calls" not in record.to_json()  # 0 is left out: older records read the same
    assert validate(record.evolve(calls=7).to_json()).calls == 7
    with pytest.raises(ValueError, match="'calls'"):
        validate({**record.to_json(), "calls": bad})


def test_what_each_mode_pushes() -> None:
    step, window, exit_ = Durability("step"), Durability("window", 30.0), Durability("exit")
    reasons = ["model", "tool", "timer", "effect", "wait", "budget", "end", "objective.judge"]
    assert all(step.pushes(r, since_push_s=0) for r in reasons)
    stops = {"wait", "budget", "end", "objective.judge"}
    assert {r for r in reasons if exit_.pushes(r, since_push_s=1e6)} == stops
    assert exit_.pushes("after run: ok", since_push_s=0)
    assert {r for r in reasons if window.pushes(r, since_push_s=0)} == stops | {"effect"}
    assert window.pushes("tool", since_push_s=0, last_step="finish")
    assert not window.pushes("tool", since_push_s=29.9, last_step="write_file")
    assert window.pushes("model", since_push_s=30.0)
    assert window.to_json() == {"mode": "window", "window_s": 30.0}
    assert exit_.to_json() == {"mode": "exit"}


@pytest.mark.parametrize("mode", ["window", "exit"])
def test_a_wait_for_approval_is_pushed_in_every_mode(world: World, mode: str) -> None:
    """The run stops at the approval: the forge holds it up to the wait, and another
    machine (the local commits gone with this one) resumes it paying no call again."""
    world.add_briefs(brief_text("b1", labels=["approval"]))
    world.add_desk("coder", [write("hello.txt", "hi\n"), finish("ready")], durability=mode)
    waiting = world.desk("coder", "--once", "--json")
    assert waiting.returncode == 75, waiting.stderr
    journal = world.journal("b1")
    assert journal.entries[-1]["kind"] == "wait" and model_steps(journal) == 2
    assert "hello.txt" in world.tree("b1")
    world.event("b1", "approve")
    woken = world.assay(
        "wake", "--forge", world.url, "--desks", str(world.desks), "--json", machine="b"
    )
    assert woken.returncode == 0, woken.stderr
    assert [r["review"] for r in json.loads(woken.stdout)["runs"]] == ["ready"]
    assert model_steps(world.journal("b1")) == 2


# --------------------------------------------------------------------- kills at many instants

LONG = 30  # model calls of the long run
KILLS = [(4, "kept"), (9, "lost"), (15, "kept"), (22, "lost")]  # (recorded calls, local journal)


def long_script(delay_s: float) -> list[dict[str, Any]]:
    steps = [dict(write(f"g{n}.txt", f"{n}\n"), delay_s=delay_s) for n in range(LONG)]
    return [*steps, finish("all written")]


def recorded(world: World, desk: str, brief: str) -> int:
    """Model calls the local journal of ``desk``'s work tree holds (answered and fsynced)."""
    return sum(
        1
        for e in world.wal("a", desk, brief)
        if e.get("kind") == "step" and e.get("step") == "model" and e.get("status") == "ok"
    )


def holds(world: World, desk: str, brief: str, count: int) -> bool:
    return recorded(world, desk, brief) >= count


def rounds_settled(world: World) -> None:
    """Wait out a group round under way on machine a: its leader may have taken a killed
    desk's unit before the kill and lands it after; the next round drops a unit whose
    process is gone. Each spool's leader lock, taken once, is that wait."""
    for lock in sorted((world.root / "machine-a").glob("cache/*.group-*/leader.lock")):
        with open(lock, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            fcntl.flock(handle, fcntl.LOCK_UN)


def drive_with_kills(world: World, mode: str, failures: list[str]) -> None:
    """Run ``mode``'s desk on its brief, SIGKILLing it at each of ``KILLS``: once its local
    journal holds that many calls (the next call, or its push, under way), then either
    restart it on the same machine or lose the machine first (its work tree deleted). The
    same holder token takes its dead process's claim back at once (a new fence). Every
    call the model answered is checked against what each kill should cost: with the local
    journal kept, only a call answered and not yet recorded; with it lost, every call
    since the forge's checkpoint. The history's count of repaid calls is never more."""
    desk, brief = f"coder-{mode}", f"k-{mode}"
    log = world.root / f"calls-{mode}.log"
    extra = {"ASSAY_MODEL_CALL_LOG": str(log), "ASSAY_HOLDER": f"holder-{mode}"}
    args = world.desk_args(desk, "--once", "--brief", brief, "--json")
    expected: Counter[int] = Counter(range(LONG + 1))
    repaid: list[tuple[int, int]] = []  # (calls paid again, the kill's call) per lost machine
    try:
        for at, journal in KILLS:
            proc = world.start(*args, extra=extra)
            wait_until(functools.partial(holds, world, desk, brief, at), timeout=120)
            world.kill(proc)
            rounds_settled(world)  # the forge's checkpoint as the resume will find it
            answered = calls(log, brief)
            local = recorded(world, desk, brief)
            on_forge = forge_calls(world, brief)
            last = max(answered)
            if journal == "kept" and mode != "step":
                expected.update(range(local, last + 1))  # answered, not yet recorded
            elif journal == "kept":  # step mode resumes from the forge: a push in flight
                expected.update(range(on_forge, last + 1))
            else:
                expected.update(range(on_forge, last + 1))
                repaid.append((last + 1 - on_forge, at))
                shutil.rmtree(world.root / "machine-a" / "work" / desk / brief)
        done = world.assay(*args, extra=extra)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["runs"][0]["review"] == "ready"
        assert model_steps(world.journal(brief)) == LONG + 1
        assert calls(log, brief) == expected, f"{mode}: {calls(log, brief)} != {expected}"
        # The history counts the calls the lost machine reported (its lease renewals' call
        # counts) past the checkpoint: never more than were paid again. (Calls made after a
        # holder's last push are known only to the machine that was lost.)
        reported = sum(
            int(e.get("repaid", 0)) for e in history_json(world, brief) if e["kind"] == "takeover"
        )
        assert 0 <= reported <= sum(actual for actual, _ in repaid), (mode, reported, repaid)
        if mode == "step":
            assert all(actual <= 1 for actual, _ in repaid), repaid  # a push in flight at most
        if mode == "window":
            assert any(actual < at for actual, at in repaid), repaid  # a mid-run checkpoint
    except BaseException as error:  # the other modes' threads go on; the test says which
        failures.append(f"{mode}: {error!r}")


@pytest.mark.slow
def test_kills_at_many_instants_repay_what_each_mode_promises(world: World) -> None:
    """One 30-call run per mode, side by side on one host (their pushes share its group),
    each killed four times; window mode's 1-second window makes checkpoints mid-run, so a
    lost machine there repays less than the calls it had made."""
    import threading

    modes = ["step", "window", "exit"]
    world.add_briefs(*(brief_text(f"k-{mode}") for mode in modes))
    for mode in modes:
        world.add_desk(
            f"coder-{mode}",
            long_script(0.08),
            lease=4.5,  # renewals ride (or go alone) every 1.5 to 2.25 s, reporting calls
            durability=mode,
            checkpoint_window="1s",
            takes={"ids": [f"k-{mode}"]},
        )
    failures: list[str] = []
    threads = [
        threading.Thread(target=drive_with_kills, args=(world, mode, failures)) for mode in modes
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not failures, "\n".join(failures)
