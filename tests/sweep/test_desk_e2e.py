"""Sweepers with the real desk loop (``assay desk run``): a SIGKILLed desk found stuck and
resumed, and an approval push that wakes a waiting desk through the forge's receive hook."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.sweep.hook import install_wake_hook
from tests.conftest import AssayRunner
from tests.desks.world import HoldingServer, World, brief_text, finish, write
from tests.forge_fixtures import wait_until
from tests.sweep.helpers import status_record, sweep_json, sweepers


@pytest.fixture
def world(tmp_path: Path, forge_path: Path) -> Iterator[World]:
    made = World(root=tmp_path, forge_path=forge_path)
    try:
        yield made
    finally:
        made.stop_all()


def test_a_killed_desk_is_swept_stuck_resumed_by_another_and_the_board_shows_it(
    world: World, tmp_path: Path, run_assay: AssayRunner
) -> None:
    responses = [write("a.txt", "a"), write("b.txt", "b"), finish("done")]
    with HoldingServer(responses, hold_turns={1}) as server:
        model = {
            "adapter": "openai",
            "model": "m",
            "base_url": server.base_url,
            "api_key_env": None,
            "attempts": 2,
            "backoff_s": 0,
        }
        world.add_briefs(brief_text("b1"))
        world.add_desk("coder", lease=1.5, model=model)
        first = world.start_desk("coder", "--once", machine="a")
        server.wait_held(1)  # mid-run: the second model call is in flight
        world.kill(first)
        server.abandon()
        wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")

        policies = sweepers(tmp_path / "sweepers")
        swept = sweep_json(run_assay, "--sweepers", str(policies), "--forge", world.url)
        [action] = swept["actions"]
        assert (action["action"], action["brief"], action["outcome"]) == (
            "mark-stuck",
            "b1",
            "done",
        )
        steps = [e for e in world.journal("b1").entries if e["kind"] == "step"]
        last = steps[-1]["name"]
        assert f"last step {last} at " in action["note"] and "desk coder" in action["note"]
        status = status_record(world.url, "b1")
        assert status is not None and (status["state"], status["last_step"]) == ("stuck", last)
        assert (
            sweep_json(run_assay, "--sweepers", str(policies), "--forge", world.url)["actions"]
            == []
        )

        second = world.desk("coder", "--once", machine="b")
        assert second.returncode == 0, second.stderr
    claim = world.claim("b1")
    assert claim is not None and claim.state == "done" and claim.fence == 2

    board = tmp_path / "BOARD.md"
    done = run_assay("board", "--out", str(board), "--forge", world.url)
    assert done.returncode == 0, done.stderr
    text = board.read_text()
    assert "## In review (1)" in text  # finished, review ready: no "done" brief state
    row = next(line for line in text.splitlines() if line.startswith("| b1 |"))
    # The sweeper's "stuck ... released for resume" was true until the resume; the finished
    # run has moved past it, so the row no longer carries it (its sessions tell the story).
    assert "| coder | 2/" in row and f"last step {last}" not in row and "stuck" not in row
    listed = run_assay("status", "--json", "--forge", world.url)
    [brief] = json.loads(listed.stdout)["briefs"]
    assert [s["fence"] for s in brief["sessions"]] == [1, 2]
    assert brief["model_calls"] >= 3


def test_an_approval_push_wakes_the_waiting_desk_through_the_hook(
    world: World, tmp_path: Path, run_assay: AssayRunner
) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]))
    world.add_desk("coder", [write("hello.txt", "hi\n"), finish("ready for review")])
    workdir = tmp_path / "waker"
    sweepers(
        workdir / "sweepers",
        **{"waker.yaml": f"kind: waker\ndispatch: local\ndesks_dir: {world.desks}\n"},
    )
    install_wake_hook(world.forge_path, workdir=workdir)

    waiting = world.desk("coder", "--once", "--json")
    assert waiting.returncode == 75, waiting.stderr
    assert status_record(world.url, "b1") is None  # the desk's own pushes woke nothing

    world.event("b1", "approve", actor="ann")
    wait_until(
        lambda: (world.claim("b1") or None) and world.claim("b1").state == "done",  # type: ignore[union-attr]
        timeout=90,
        what="the woken desk to finish",
    )
    wakes = [e for e in world.journal("b1").entries if e["kind"] == "wake"]
    assert [w["event"]["kind"] for w in wakes] == ["approve"]
    status = status_record(world.url, "b1")
    assert status is not None and status["state"] == "woken"
    review = world.review("b1")
    assert review is not None and review.state == "ready"
    board = tmp_path / "BOARD.md"
    assert run_assay("board", "--out", str(board), "--forge", world.url).returncode == 0
    row = next(line for line in board.read_text().splitlines() if line.startswith("| b1 |"))
    assert "refs/assay/reviews/b1 (ready)" in row and "woken: " in row


def test_a_run_paused_on_budget_is_reported_with_what_it_spent(
    world: World, tmp_path: Path, run_assay: AssayRunner
) -> None:
    world.add_briefs(brief_text("b1", budget={"model_calls": 1}))
    world.add_desk("coder", [write("a.txt", "a"), write("b.txt", "b"), finish("done")])
    paused = world.desk("coder", "--once")
    assert paused.returncode == 7, paused.stderr
    policies = sweepers(tmp_path / "sweepers")
    swept = sweep_json(run_assay, "--sweepers", str(policies), "--forge", world.url)
    [action] = swept["actions"]
    assert (action["action"], action["brief"]) == ("report-budget", "b1")
    assert "1 model calls" in action["note"]
    status = status_record(world.url, "b1")
    assert status is not None and status["state"] == "paused"
    assert status["spent"]["model_calls"] == 1
    assert sweep_json(run_assay, "--sweepers", str(policies), "--forge", world.url)["actions"] == []
    listed = run_assay("status", "--json", "--forge", world.url)
    [brief] = json.loads(listed.stdout)["briefs"]
    assert brief["state"] == "paused" and "paused on budget" in brief["status_note"]


@pytest.mark.slow
def test_a_status_still_saying_working_is_corrected_from_the_claim(
    world: World, tmp_path: Path, run_assay: AssayRunner
) -> None:
    from assay.forge import RefLog, open_forge
    from assay.plumbing import ASSAY_IDENTITY

    world.add_briefs(brief_text("b1"))
    world.add_desk("coder", [write("a.txt", "a"), finish("done")])
    assert world.desk("coder", "--once").returncode == 0
    with open_forge(world.url) as forge:  # what a mirror left behind while the desk ran
        RefLog.for_brief(forge, "status", "b1").append(
            {"state": "working", "note": "coder is working on it"}, author=ASSAY_IDENTITY
        )
    policies = sweepers(tmp_path / "sweepers")
    swept = sweep_json(run_assay, "--sweepers", str(policies), "--forge", world.url)
    assert [(a["action"], a["brief"]) for a in swept["actions"]] == [("correct-status", "b1")]
    status = status_record(world.url, "b1")
    # Corrected to the brief's state as the board shows it (finished, its review open).
    [shown] = json.loads(run_assay("status", "--json", "--forge", world.url).stdout)["briefs"]
    assert status is not None and (status["state"], status["was"]) == ("in review", "working")
    assert shown["state"] == status["state"]
    assert sweep_json(run_assay, "--sweepers", str(policies), "--forge", world.url)["actions"] == []
