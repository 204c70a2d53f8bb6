"""Every forge command's ``--json`` carries ``rest``: the REST calls it made (zeros here).

On the embedded forge claims, journals, events and evidence travel over git, so each
command reports zero REST calls; over the fake GitHub a desk run reports its issue list
(``tests/github/test_desk_on_github.py``). The commands run as real subprocesses.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.cli.options import _NO_REST_CALLS, rest_calls
from assay.github.rest import RestStats, process_stats
from tests.desks.world import World, brief_text, finish, write

ZERO = RestStats().to_json()


def test_the_helper_reports_the_process_stats_and_zeros_in_their_shape() -> None:
    # Once the REST module is loaded, the helper is exactly its process-wide counter ...
    assert rest_calls() == process_stats().to_json()
    # ... and before, zeros spelled as a fresh counter spells them.
    assert _NO_REST_CALLS == ZERO


@pytest.mark.slow
def test_forge_commands_report_zero_rest_calls_on_the_embedded_forge(world: World) -> None:
    world.add_briefs(
        brief_text("b1", labels=["approval"], verify=[{"id": "unit", "run": "python -c pass"}]),
        brief_text("b2", priority=-1),
    )
    world.add_desk("coder", [write("a.txt", "a\n"), finish("done")])
    forge = ["--forge", world.url]
    desks = ["--desks", str(world.desks)]
    seen: dict[str, Any] = {}

    def run(name: str, *args: str, code: int = 0) -> dict[str, Any]:
        done = world.assay(*args, "--json")
        assert done.returncode == code, (name, done.stdout, done.stderr)
        result: dict[str, Any] = json.loads(done.stdout)
        seen[name] = result["rest"]
        return result

    waiting = run("desk run", "desk", "run", "coder", "--once", *forge, *desks, code=75)
    assert waiting["runs"][0]["waiting_for"] == "approval"
    run("approve", "approve", "b1", *forge)
    run("signal", "signal", "b1", "a note", *forge)
    woken = run("wake", "wake", *forge, *desks)
    assert [r["brief"] for r in woken["runs"]] == ["b1"]
    run("verify", "verify", "b1", *forge)
    run("merge", "merge", "b1", *forge)
    run("cancel", "cancel", "b2", *forge)
    run("resync", "resync", *forge)
    run("status", "status", *forge)
    run("board", "board", "--out", str(world.root / "BOARD.md"), *forge)
    run("sweep", "sweep", "--dry-run", *forge)
    assert seen == {name: ZERO for name in seen}
    assert len(seen) == 11
