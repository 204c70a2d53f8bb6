"""Approvals, steering and cancellation through the forge's events refs, end to end."""

from __future__ import annotations

import json

from assay.forge import open_forge
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.desks.world import (
    HoldingServer,
    World,
    brief_text,
    finish,
    model_steps,
    pids_alive,
    wait_until,
    write,
)

STEER = "name the file greeting.txt"


def test_approval_waits_with_no_process_then_wake_continues(world: World) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]))
    world.add_desk("coder", [write("hello.txt", "hi\n"), finish("ready for review")])
    waiting = world.desk("coder", "--once", "--json")
    assert waiting.returncode == 75, waiting.stderr
    assert json.loads(waiting.stdout)["runs"][0]["waiting_for"] == "approval"
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.waiting_for) == ("waiting", "approval")
    review = world.review("b1")
    assert review is not None and review.state == "draft"
    # The run holds no process: nothing of Assay runs against this forge.
    assert pids_alive(str(world.forge_path)) == []
    # Nothing has arrived yet: wake does nothing.
    idle = world.assay("wake", "--forge", world.url, "--desks", str(world.desks), "--json")
    assert idle.returncode == 0 and json.loads(idle.stdout)["runs"] == []
    approved = world.assay("approve", "b1", "--forge", world.url, "--json")
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["kind"] == "approve"
    woken = world.assay(
        "wake", "--forge", world.url, "--desks", str(world.desks), "--json", machine="b"
    )
    assert woken.returncode == 0, woken.stderr
    assert [(r["brief"], r["why"], r["review"]) for r in json.loads(woken.stdout)["runs"]] == [
        ("b1", "wake", "ready")
    ]
    journal = world.journal("b1")
    wakes = [e for e in journal.entries if e["kind"] == "wake"]
    assert [w["event"]["kind"] for w in wakes] == ["approve"]
    assert model_steps(journal) == 2  # the resumed run paid for no model call again
    claim = world.claim("b1")
    assert claim is not None and claim.state == "done"


def test_rejection_reaches_the_model_and_the_run_carries_on(world: World) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]))
    world.add_desk(
        "coder",
        [finish("first try"), write("hello.txt", "hi\n"), finish("second try")],
    )
    assert [r.code for r in world.run_here("coder")] == [75]
    world.event("b1", "reject", text="write hello.txt first")
    assert [r.code for r in world.run_here("coder")] == [75]  # the second finish waits again
    world.event("b1", "approve")
    assert [r.code for r in world.run_here("coder")] == [0]
    assert "hello.txt" in world.tree("b1")
    review = world.review("b1")
    assert review is not None and "second try" in review.body


def test_steering_arrives_once_even_when_the_desk_crashed_right_after_reading_it(
    world: World,
) -> None:
    responses = [
        write("a.txt", "a"),
        write("b.txt", "b"),
        write("greeting.txt", "hello"),
        finish("steered"),
    ]
    with HoldingServer(responses, hold_turns={1, 2}) as server:
        model = server.desk_model()
        world.add_briefs(brief_text("b1"))
        world.add_desk("coder", lease=2, model=model)
        first = world.start_desk("coder", "--once", machine="a")
        server.wait_held(1)
        sent = world.assay("signal", "b1", STEER, "--forge", world.url, "--json")
        assert sent.returncode == 0, sent.stderr
        actor = json.loads(sent.stdout)["actor"] or "a human"
        server.let_go(1)
        server.wait_held(2)  # the desk drained the signal, then called the model
        drained = [
            e for e in world.wal("a", "coder", "b1") if e.get("kind") == "signal" and e["events"]
        ]
        assert [e["events"][0]["text"] for e in drained] == [STEER]
        world.kill(first)
        server.abandon()
        wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")
        done = world.desk("coder", "--once", machine="b")
        assert done.returncode == 0, done.stderr
        by_turn = {
            sum(1 for m in r["messages"] if m["role"] == "assistant"): r for r in server.requests
        }
        steering = [
            [m for m in by_turn[turn]["messages"] if STEER in str(m.get("content"))]
            for turn in sorted(by_turn)
        ]
        assert [len(found) for found in steering] == [0, 0, 1, 1]
        assert steering[2][0]["content"] == f"Steering from {actor}: {STEER}"
        journal = world.journal("b1")
        drained = [e for e in journal.entries if e["kind"] == "signal" and e["events"]]
        assert len(drained) == 1
        assert server.count == model_steps(journal)


def test_cancel_closes_a_waiting_run_and_skips_an_unclaimed_brief(world: World) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]), brief_text("b2"))
    world.add_desk("coder", [finish()])
    assert world.desk("coder", "--once", "--brief", "b1").returncode == 75
    for brief in ("b1", "b2"):
        cancelled = world.assay("cancel", brief, "--forge", world.url, "--json")
        assert cancelled.returncode == 0, cancelled.stderr
    woken = world.assay("wake", "--forge", world.url, "--desks", str(world.desks), "--json")
    assert woken.returncode == 0, woken.stderr
    assert [(r["brief"], r["status"]) for r in json.loads(woken.stdout)["runs"]] == [
        ("b1", "cancelled")
    ]
    claim = world.claim("b1")
    assert claim is not None and claim.state == "done"
    review = world.review("b1")
    assert review is not None and review.state == "closed"
    # b2 was cancelled before anyone took it.
    assert world.desk("coder", "--once").returncode == 3
    assert world.claim("b2") is None


def test_a_malformed_event_is_skipped_with_a_note_and_never_delivered(world: World) -> None:
    world.add_briefs(brief_text("b1", priority=5), brief_text("b2"))
    world.add_desk("coder", [finish()])
    record = {
        "v": 1,
        "kind": "events",
        "id": "e1",
        "event": "explode",
        "text": "",
        "actor": "x",
        "at": "2026-01-01T00:00:00Z",
        "data": {},
    }
    with open_forge(world.url, cache_dir=world.root / "raw") as forge:
        commit = forge.commit(
            {"record.json": json.dumps(record).encode()},
            parents=[],
            message="bad event",
            author=ASSAY_IDENTITY,
        )
        assert forge.push([RefUpdate("refs/assay/events/b1", commit, expected=None)]).ok
    named = world.desk("coder", "--brief", "b1")
    assert named.returncode == 0, named.stdout + named.stderr
    assert "refs/assay/events/b1" in named.stderr and "'event'" in named.stderr
    assert "skipped" in named.stderr
    assert not [e for e in world.journal("b1").entries if '"e1"' in json.dumps(e)]
    assert [r.brief for r in world.run_here("coder")] == ["b2"]


def test_served_forge_wakes_an_approved_run_when_the_event_is_pushed(world: World) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]))
    world.add_desk("coder", [write("hello.txt", "hi\n"), finish("approved work")])
    server = world.start(
        "desk", "serve", str(world.forge_path), "--desks", str(world.desks), machine="server"
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:")
    waiting = world.assay(
        "desk", "run", "coder", "--once", "--forge", url, "--desks", str(world.desks)
    )
    assert waiting.returncode == 75, waiting.stderr
    assert world.assay("approve", "b1", "--forge", url).returncode == 0
    # No desk process is started by the test: the push of the approval wakes the run.
    wait_until(
        lambda: (c := world.claim("b1")) is not None and c.state == "done",
        timeout=120,
        what="the served waker to finish the run",
    )
    review = world.review("b1")
    assert review is not None and review.state == "ready"


def test_served_forge_wakes_a_timer_wait_when_it_ends_with_no_push(world: World) -> None:
    world.add_briefs(brief_text("b1"))
    (world.desks / "sleeper.py").write_text(
        "def work(run, brief):\n"
        "    run.sleep(0.5)\n"
        "    return {'status': 'done', 'summary': 'slept', 'evidence': []}\n",
        encoding="utf-8",
    )
    (world.desks / "sleeper.yaml").write_text(
        "name: sleeper\nkind: python\nentry: sleeper:work\ntakes: {globs: ['*']}\n",
        encoding="utf-8",
    )
    server = world.start(
        "desk", "serve", str(world.forge_path), "--desks", str(world.desks), machine="server"
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    waiting = world.assay(
        "desk", "run", "sleeper", "--once", "--forge", url, "--desks", str(world.desks)
    )
    assert waiting.returncode == 75, waiting.stderr
    # Nothing is pushed after the wait: the waker read its time and woke the run then.
    wait_until(
        lambda: (c := world.claim("b1")) is not None and c.state == "done",
        timeout=60,
        what="the served waker to wake the timer wait",
    )
    wakes = [e for e in world.journal("b1").entries if e["kind"] == "wake"]
    assert len(wakes) == 1 and wakes[0]["timer"]
