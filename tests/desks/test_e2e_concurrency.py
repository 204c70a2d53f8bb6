"""Two desks started at once on five briefs: each brief is done by exactly one desk."""

from __future__ import annotations

import json

from tests.desks.world import World, brief_text, finish, write

BRIEFS = [f"b{i}" for i in range(1, 6)]


def test_two_desks_five_briefs_each_done_exactly_once(world: World) -> None:
    world.add_briefs(*(brief_text(b, priority=1) for b in BRIEFS))
    world.add_desk("coder", [write("out.txt", "x"), finish()])
    desks = [world.start_desk("coder", "--json", machine=machine) for machine in ("one", "two")]
    runs: dict[str, list[str]] = {}
    for machine, proc in zip(("one", "two"), desks, strict=True):
        stdout, stderr = proc.communicate(timeout=240)
        assert proc.returncode in {0, 3}, stderr  # 3: the other desk took everything
        for run in json.loads(stdout)["runs"]:
            assert run["code"] == 0, run
            runs.setdefault(run["brief"], []).append(machine)
    assert sorted(runs) == BRIEFS
    assert all(len(machines) == 1 for machines in runs.values()), runs
    for brief in BRIEFS:
        claim = world.claim(brief)
        assert claim is not None and (claim.state, claim.fence) == ("done", 1)
        journal = world.journal(brief)
        assert [e["kind"] for e in journal.entries].count("start") == 1
        assert {e["fence"] for e in journal.entries} == {1}  # one holder wrote it all
        review = world.review(brief)
        assert review is not None and review.state == "ready"


def test_one_desk_process_with_concurrency_runs_slots_side_by_side(world: World) -> None:
    world.add_briefs(*(brief_text(b) for b in BRIEFS[:4]))
    world.add_desk("coder", [write("out.txt", "x"), finish()], concurrency=3)
    done = world.desk("coder", "--json", "--holder", "box")
    assert done.returncode == 0, done.stderr
    assert sorted(r["brief"] for r in json.loads(done.stdout)["runs"]) == BRIEFS[:4]
    holders = set()
    for brief in BRIEFS[:4]:
        claim = world.claim(brief)
        assert claim is not None and (claim.state, claim.fence) == ("done", 1)
        holders.add(claim.holder)
    assert holders <= {"box-0", "box-1", "box-2"} and len(holders) >= 2
