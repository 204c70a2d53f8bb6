"""A desk fleet against an embedded forge with a push budget: every brief done, no window
over the budget.

Two real ``assay desk run`` processes (each its own machine state) work four briefs through
a real ``ForgeServer`` on loopback whose settings record sets a budget; the budget's window
is test-sized (``budget_window``), so the fleet pushes faster than the budget allows and
its pushes wait their turn.
"""

from __future__ import annotations

import json

from assay.forge import ForgeServer
from tests.desks.world import World, brief_text, finish, write
from tests.forge.test_budget import Landings, most_in_window, set_budget

BRIEFS = [f"b{i}" for i in range(1, 5)]
BUDGET, WINDOW = 4, 1.0


def test_a_fleet_under_a_push_budget_finishes_every_brief(world: World) -> None:
    world.add_briefs(*(brief_text(b, priority=1) for b in BRIEFS))
    world.add_desk("coder", [write("out.txt", "x"), finish()])
    set_budget(world.forge_path, BUDGET)
    landings = Landings()
    with ForgeServer(world.forge_path, on_push=landings, budget_window=WINDOW) as server:
        args = ("desk", "run", "coder", "--forge", server.url, "--desks", str(world.desks))
        desks = [world.start(*args, "--json", machine=m) for m in ("one", "two")]
        runs: dict[str, list[int]] = {}
        for proc in desks:
            stdout, stderr = proc.communicate(timeout=240)
            assert proc.returncode in {0, 3}, stderr  # 3: the other desk took the rest
            for run in json.loads(stdout)["runs"]:
                runs.setdefault(run["brief"], []).append(run["code"])
        pushed, throttled = server.started["budgeted"], server.started["throttled"]
    assert runs == {brief: [0] for brief in BRIEFS}
    for brief in BRIEFS:
        claim = world.claim(brief)
        assert claim is not None and claim.state == "done"
        review = world.review(brief)
        assert review is not None and review.state == "ready"
    assert pushed == len(landings.times) > BUDGET
    assert throttled > 0  # the fleet did push faster than the budget
    assert most_in_window(landings.times, WINDOW) <= BUDGET
