"""``assay resync``: the true state of every brief from the forge alone, and resuming a
crashed run on a fresh machine; and the ``python`` desk kind."""

from __future__ import annotations

import json

import pytest

from assay.desks import load_desks
from assay.desks.host.loop import RunReport
from assay.desks.host.resync import wake
from assay.forge import open_forge
from tests.desks.world import World, brief_text, finish, wait_until, write


def states(world: World, *args: str, machine: str = "t") -> dict[str, dict[str, object]]:
    done = world.assay("resync", "--forge", world.url, "--json", *args, machine=machine)
    assert done.returncode == 0, done.stderr
    return {row["brief"]: row for row in json.loads(done.stdout)["briefs"]}


@pytest.mark.slow
def test_resync_reports_states_and_resumes_a_crashed_run(world: World) -> None:
    responses = [write("a.txt", "a"), write("b.txt", "b"), finish()]
    slow = [dict(r) for r in responses]
    slow[1]["delay_s"] = 120
    world.add_briefs(brief_text("b1"), brief_text("b2", depends_on=["b1"]))
    world.add_desk("coder", slow, lease=2)
    first = world.start_desk("coder", "--once", "--brief", "b1", machine="a")

    def in_second_model_call() -> bool:
        wal = world.wal("a", "coder", "b1")
        return sum(1 for e in wal if e.get("step") == "model" and e["status"] == "started") >= 2

    wait_until(in_second_model_call, timeout=60, what="the second model call")
    assert states(world)["b1"]["state"] == "held"
    world.kill(first)
    wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to expire")
    row = states(world)["b1"]
    # The board's vocabulary: held with its lease run out is "expired" until swept
    # ("stuck" once a sweeper marked it); never claimed is "queued".
    assert (row["state"], row["last_step"]) == ("expired", "model")  # the last step pushed
    assert states(world)["b2"]["state"] == "queued"
    (world.desks / "scripts" / "coder.json").write_text(json.dumps({"responses": responses}))
    resumed = world.assay(
        "resync",
        "--forge",
        world.url,
        "--desk",
        "coder",
        "--desks",
        str(world.desks),
        "--json",
        machine="b",
    )
    assert resumed.returncode == 0, resumed.stderr
    runs = json.loads(resumed.stdout)["runs"]
    assert [(r["brief"], r["why"], r["code"]) for r in runs] == [("b1", "takeover", 0)]
    assert states(world)["b1"]["state"] == "in review"
    world.merge_to_main("b1")
    assert states(world)["b1"]["state"] == "merged"


def test_python_desk_runs_its_function_against_the_run_api(world: World) -> None:
    world.add_briefs(brief_text("b1", body="Say hello."))
    (world.desks / "pydesk.py").write_text(
        "from pathlib import Path\n"
        "def work(run, brief):\n"
        "    def body():\n"
        "        Path('hello.txt').write_text(brief.body)\n"
        "        return {'wrote': 'hello.txt'}\n"
        "    done = run.step('write', body)\n"
        "    return {'status': 'done', 'summary': 'wrote ' + done['wrote'], 'evidence': []}\n",
        encoding="utf-8",
    )
    (world.desks / "py.yaml").write_text(
        "name: py\nkind: python\nentry: pydesk:work\ntakes: {globs: ['*']}\n", encoding="utf-8"
    )
    done = world.desk("py", "--once", "--json")
    assert done.returncode == 0, done.stderr
    assert "hello.txt" in world.tree("b1")
    review = world.review("b1")
    assert review is not None and "wrote hello.txt" in review.body


def test_a_timer_wait_is_woken_once_its_time_has_come(world: World) -> None:
    world.add_briefs(brief_text("b1"))
    (world.desks / "sleeper.py").write_text(
        "def work(run, brief):\n"
        "    run.sleep(1.0)\n"
        "    return {'status': 'done', 'summary': 'slept', 'evidence': []}\n",
        encoding="utf-8",
    )
    (world.desks / "sleeper.yaml").write_text(
        "name: sleeper\nkind: python\nentry: sleeper:work\ntakes: {globs: ['*']}\n",
        encoding="utf-8",
    )
    [waiting] = world.run_here("sleeper")
    assert (waiting.code, waiting.waiting_for) == (75, "timer")

    def woken() -> list[RunReport]:
        with open_forge(world.url, cache_dir=world.root / "waker-cache") as forge:
            return wake(forge, load_desks(world.desks), workroot=world.root / "waker-work")

    reports = wait_until(woken, timeout=60, what="the timer to fire")
    assert [(r.brief, r.why, r.code) for r in reports] == [("b1", "wake", 0)]
    wakes = [e for e in world.journal("b1").entries if e["kind"] == "wake"]
    assert len(wakes) == 1 and wakes[0]["event"] is None and wakes[0]["timer"]
