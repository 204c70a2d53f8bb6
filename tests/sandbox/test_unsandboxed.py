"""A desk that declares `isolation: off` runs, and the journal and the board say so."""

from __future__ import annotations

import pytest

from assay.desks import parse_manifest
from assay.errors import BadInput
from assay.forge import open_forge
from assay.forgestate.rows import collect_board
from tests.desks.world import World, brief_text, call, finish


@pytest.mark.parametrize(
    ("sandbox", "sandboxed"),
    [(None, True), ({"network": "host", "isolation": "off"}, False)],
)
def test_the_start_entry_and_the_board_record_how_the_run_was_confined(
    world: World, sandbox: dict[str, str] | None, sandboxed: bool
) -> None:
    world.add_briefs(brief_text("b1"))
    extra = {"sandbox": sandbox} if sandbox else {}
    world.add_desk(
        "coder",
        [{"tool_calls": [call("run", command="true")]}, finish("done")],
        tools=("run", "finish"),
        run={"allow": ["true"]},
        **extra,
    )
    [report] = world.run_here("coder")
    assert report.code == 0, report
    [start] = [e for e in world.wal("a", "coder", "b1") if e["kind"] == "start"]
    assert start["sandbox"]["sandboxed"] is sandboxed
    with open_forge(world.url, cache_dir=world.root / "board-cache") as forge:
        board, _ = collect_board(forge)
    [row] = [r for r in board.rows if r.id == "b1"]
    assert ("unsandboxed run" in row.status_note) is not sandboxed


def test_isolation_off_must_say_network_host() -> None:
    text = (
        "name: d\nkind: agent\nmodel: {adapter: scripted, script: s.json}\ntools: [finish]\n"
        "sandbox: {isolation: off}\n"
    )
    with pytest.raises(BadInput, match=r"d\.yaml.*sandbox\.network.*network: host"):
        parse_manifest(text, source="desks/d.yaml")
