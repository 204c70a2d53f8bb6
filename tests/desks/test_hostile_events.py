"""Attack: an oversized event record pushed to a waiting brief's events ref.

A 1 MB record used to read as delivered: ``approve`` said so, the sweep's waker planned
``woken``, and every desk that resumed the brief died with 65, forever. Now the record is
skipped by the one event decoder (never delivered, never dispatched), the note names it,
and a real approval afterwards resumes the run.
"""

from __future__ import annotations

import json

import pytest

from assay.forge import open_forge
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.desks.world import World, brief_text, finish, write


def _push_raw_event(world: World, brief: str, record: dict[str, object]) -> None:
    ref = f"refs/assay/events/{brief}"
    with open_forge(world.url, cache_dir=world.root / "attacker") as forge:
        tip = forge.fetch([ref]).get(ref)
        commit = forge.commit(
            {"record.json": json.dumps(record).encode()},
            parents=[tip] if tip else [],
            message="event",
            author=ASSAY_IDENTITY,
        )
        assert forge.push([RefUpdate(ref, commit, expected=tip)]).ok


@pytest.mark.slow
def test_an_oversized_event_is_skipped_and_a_real_one_still_wakes(world: World) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]))
    world.add_desk("coder", [write("hello.txt", "hi\n"), finish("ready for review")])
    assert world.desk("coder", "--once", "--json").returncode == 75
    huge = {
        "v": 1,
        "kind": "events",
        "id": "huge",
        "event": "approve",
        "text": "x" * 1_000_000,
        "actor": "mallory",
        "at": "2026-01-01T00:00:00Z",
        "data": {},
    }
    _push_raw_event(world, "b1", huge)
    sweep = world.assay("sweep", "--forge", world.url, "--dry-run", "--json")
    assert sweep.returncode == 0, sweep.stderr
    assert "woken" not in sweep.stdout  # nothing arrived that counts
    idle = world.assay("wake", "--forge", world.url, "--desks", str(world.desks), "--json")
    assert idle.returncode == 0, idle.stdout + idle.stderr
    assert json.loads(idle.stdout)["runs"] == []
    claim = world.claim("b1")
    assert claim is not None and claim.state == "waiting"

    approved = world.assay("approve", "b1", "--forge", world.url, "--json")
    assert approved.returncode == 0, approved.stderr
    woken = world.assay("wake", "--forge", world.url, "--desks", str(world.desks), "--json")
    assert woken.returncode == 0, woken.stdout + woken.stderr
    runs = json.loads(woken.stdout)["runs"]
    assert [(r["brief"], r["code"]) for r in runs] == [("b1", 0)]
    journal = world.journal("b1")
    assert [w["event"]["id"] for w in journal.entries if w["kind"] == "wake"] != ["huge"]


def test_approve_refuses_an_oversized_event(world: World) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]))
    done = world.assay("signal", "b1", "x" * 30_000, "--forge", world.url)
    assert done.returncode == 65, done.stdout + done.stderr
    assert "text" in done.stderr
