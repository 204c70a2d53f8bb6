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
    world.add_briefs(
        brief_text("goal", priority=1, objective={"judge": JUDGE, "max_runs": 5}),
        brief_text("other"),
    )
    world.add_desk("coder", RESPONSES)
    once = world.desk("coder", "--once", "--json")
    assert once.returncode == 75, once.stderr
    [first] = json.loads(once.stdout)["runs"]
    assert (first["brief"], first["status"]) == ("goal", "requeued")
    claim = world.claim("goal")
    assert claim is not None and claim.state == "released"  # back in the queue
    # The queue goes on by priority: the objective's second run, its third, then the rest.
    reports = world.run_here("coder", once=False, machine="b")
    assert [(r.brief, r.status) for r in reports] == [
        ("goal", "requeued"),
        ("goal", "ok"),
        ("other", "ok"),
    ]
    assert reports[1].review == "ready"
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
    requeued, paused = world.run_here("coder", once=False)
    assert (requeued.status, paused.code, paused.status) == ("requeued", 7, "paused")
    claim = world.claim("goal")
    assert claim is not None and (claim.state, claim.waiting_for) == ("waiting", "objective")
    assert world.run_here("coder") == []  # nothing arrived: not taken
    world.add_briefs(brief_text("goal", objective={"judge": JUDGE, "max_runs": 3}))
    woken, third = world.run_here("coder", once=False, machine="b")
    assert (woken.why, woken.status) == ("wake", "requeued")
    assert (third.why, third.code) == ("resume", 0)
    assert [v["exit"] for v in world.outputs("goal", "objective.judge")] == [1, 1, 0]
    claim = world.claim("goal")
    assert claim is not None and claim.state == "done"
