"""Standing objectives: the judge runs in a clean checkout after each run; a failing
verdict queues another run while runs remain, then the objective pauses (never fails)."""

from __future__ import annotations

import json

from tests.desks.world import World, brief_text, finish, write

# The judge passes once level.txt says 3; it runs in a fresh clone of the branch head.
JUDGE = "python3 -c \"import sys; sys.exit(open('level.txt').read().strip() != '3')\""
RESPONSES = [
    write("level.txt", "1"),
    finish("level 1"),
    write("level.txt", "2"),
    finish("level 2"),
    write("level.txt", "3"),
    finish("level 3"),
]


def test_objective_whose_judge_fails_twice_then_passes(world: World) -> None:
    world.add_briefs(brief_text("goal", objective={"judge": JUDGE, "max_runs": 5}))
    world.add_desk("coder", RESPONSES)
    [done] = world.run_here("coder")
    assert (done.code, done.review) == (0, "ready")
    verdicts = world.outputs("goal", "objective.judge")
    assert [v["exit"] for v in verdicts] == [1, 1, 0]
    # Each verdict judged the commit the run had pushed, not the desk's own work tree.
    assert len({v["head_sha"] for v in verdicts}) == 3
    review = world.review("goal")
    assert review is not None and "level 3" in review.body
    assert world.tree("goal")["level.txt"]


def test_objective_pauses_when_runs_are_used_up_and_resumes_when_raised(world: World) -> None:
    world.add_briefs(brief_text("goal", objective={"judge": JUDGE, "max_runs": 2}))
    world.add_desk("coder", RESPONSES)
    paused = world.desk("coder", "--once", "--json")
    assert paused.returncode == 7, paused.stderr
    assert json.loads(paused.stdout)["runs"][0]["status"] == "paused"
    claim = world.claim("goal")
    assert claim is not None and (claim.state, claim.waiting_for) == ("waiting", "objective")
    assert world.run_here("coder") == []  # nothing arrived: not taken
    world.add_briefs(brief_text("goal", objective={"judge": JUDGE, "max_runs": 3}))
    [resumed] = world.run_here("coder", machine="b")
    assert (resumed.code, resumed.why) == (0, "wake")
    assert [v["exit"] for v in world.outputs("goal", "objective.judge")] == [1, 1, 0]
    claim = world.claim("goal")
    assert claim is not None and claim.state == "done"
