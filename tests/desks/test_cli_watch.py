"""A cli run you can watch: ``assay history --brief`` on the forge shows what the model
said, the agent's tool calls with their output, the kill, the resume and the request the
kill left in flight, which the resuming process sent upstream again (and the counts say
so: the board's and the status's ``repeated_requests``, the scripted upstream's own log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.desks.cli_helpers import SCRIPT, add_cli_desk, processes_in
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake
from tests.forge_fixtures import wait_until
from tests.sweep.helpers import sweepers


def kill_inside_turn(world: World, fake: WireFake, brief: str, turn: int) -> None:
    """Run the desk on ``brief``, SIGKILL it while the upstream holds ``turn``'s request,
    then (the CLI dead too and the lease expired) run it to its end."""
    fake.hold(at_turn=turn)
    proc = world.start_desk("cli", "--once", "--brief", brief)
    fake.wait_for_in_flight(1, timeout=60)
    world.kill(proc)
    work = world.root / "machine-a" / "work" / "cli" / brief
    wait_until(lambda: not processes_in(work), timeout=10, what="the CLI to die too")
    fake.release()  # the held request is answered into a closed connection: nobody read it
    wait_until(lambda: world.claim_expired(brief), timeout=60, what="the lease to expire")
    done = world.desk("cli", "--once", "--brief", brief)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("api", ["openai-chat", "anthropic --stream"])
def test_history_shows_answers_tools_the_kill_and_the_repeated_request(
    world: World, upstream_key: None, api: str
) -> None:
    world.add_briefs(brief_text("watch"), brief_text("calm"))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake, api=api.split()[0], stream="--stream" in api, lease="2s")
        assert world.desk("cli", "--once", "--brief", "calm").returncode == 0
        kill_inside_turn(world, fake, "watch", 1)
        asked = [s.turn for s in fake.seen if s.turn is not None and s.side is None]
    # The upstream's own account: turn 1 of "watch" was sent twice (calm's three, then
    # watch's), and nothing else was.
    assert asked.count(1) == 3 and asked.count(0) == 2 and asked.count(2) == 2

    shown = world.assay("history", "--brief", "watch", "--forge", world.url, extra=WIDE)
    assert shown.returncode == 0, shown.stderr
    kinds = [line.split("│")[3].strip() for line in shown.stdout.splitlines() if "│" in line]
    text = shown.stdout
    assert kinds.count("stopped") == 1 and kinds.count("repeated") == 1
    assert "in flight: model:wire" in text
    assert "asks" in kinds and "Bash" in text and "cat hello.txt" in text  # what it asked for
    assert "all done" in text  # what the model said at the end
    # The agent's tool calls, each with its output: cat printed the file Write wrote.
    agent = [line for line in text.splitlines() if " agent " in line]
    assert len(agent) == 2 and "-> hello" in agent[1]
    assert "3 model call(s) answered, 4 request(s) sent upstream (1 repeated" in text
    assert "1 process(es) stopped and resumed" in text

    lines = [
        json.loads(line)
        for line in world.assay(
            "history", "--brief", "watch", "--forge", world.url, "--json"
        ).stdout.splitlines()
    ]
    [again] = [line for line in lines if line.get("repeated")]
    assert again["said"]["tool_calls"] == [
        {"name": "Bash", "arguments": {"command": "cat hello.txt"}}
    ]
    [resumed] = [line for line in lines if "resumed" in line]
    assert resumed["kind"] == "takeover"
    assert resumed["resumed"]["in_flight"] == [{"pos": again["pos"], "step": "model:wire"}]
    final = [line for line in lines if line.get("said", {}).get("text")]
    assert final[-1]["said"] == {"text": "all done", "tool_calls": []}

    calm = world.assay("history", "--brief", "calm", "--forge", world.url, extra=WIDE)
    assert " stopped " not in calm.stdout and " repeated " not in calm.stdout
    assert "3 request(s) sent upstream (0 repeated)" in calm.stdout

    # The board and the status count the request twice, as the upstream received it.
    status = world.assay("status", "--forge", world.url, "--json")
    assert status.returncode == 0, status.stderr
    rows = {row["id"]: row for row in json.loads(status.stdout)["briefs"]}
    assert (rows["watch"]["model_calls"], rows["watch"]["repeated_requests"]) == (3, 1)
    assert (rows["calm"]["model_calls"], rows["calm"]["repeated_requests"]) == (3, 0)
    assert json.loads(status.stdout)["totals"]["repeated_requests"] == 1
    table = world.assay("status", "--forge", world.url, extra=WIDE)
    assert "3+1" in table.stdout
    assert "1 model request(s) sent upstream again" in table.stdout
    board = world.root / "BOARD.md"
    html = world.root / "board.html"
    drawn = world.assay("board", "--forge", world.url, "--out", str(board), "--html", str(html))
    assert drawn.returncode == 0, drawn.stderr
    for page in (board, html):
        text = page.read_text(encoding="utf-8")
        assert "3 +1 repeated" in text and "6 +1 repeated" in text  # the row, the totals
    # Each run has its page beside the board's, linked from it: the same timeline.
    assert '<a href="runs/watch.html">watch</a>' in html.read_text(encoding="utf-8")
    run_page = (world.root / "runs" / "watch.html").read_text(encoding="utf-8")
    assert run_page.count('data-kind="stopped"') == 1 and 'data-kind="repeated"' in run_page
    assert "in flight: model:wire" in run_page and "all done" in run_page
    assert (
        "cat hello.txt" in run_page
        and '<tr class="entry resumed" data-kind="takeover">' in run_page
    )


WIDE = {"COLUMNS": "160"}


@pytest.mark.slow
def test_status_says_why_and_drops_a_note_the_brief_has_moved_past(
    world: World, upstream_key: None, tmp_path: Path
) -> None:
    world.add_briefs(brief_text("stale"), brief_text("down"))
    policies = sweepers(tmp_path / "sweepers")
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake, lease="2s")
        # "stale": killed inside a call, marked stuck by the sweeper, resumed, merged.
        fake.hold(at_turn=1)
        proc = world.start_desk("cli", "--once", "--brief", "stale")
        fake.wait_for_in_flight(1, timeout=60)
        world.kill(proc)
        work = world.root / "machine-a" / "work" / "cli" / "stale"
        wait_until(lambda: not processes_in(work), timeout=10, what="the CLI to die too")
        fake.release()
        wait_until(lambda: world.claim_expired("stale"), timeout=60, what="the lease to expire")
        swept = world.assay("sweep", "--sweepers", str(policies), "--forge", world.url)
        assert swept.returncode == 0, swept.stderr
        assert "released for resume" in status_rows(world)["stale"]["status_note"]
        assert world.desk("cli", "--once", "--brief", "stale").returncode == 0
        # "down": the upstream stays broken (502) past the desk's retries; the desk gives it
        # back (a 429/503/529 would park it as a wait for model capacity instead).
        fake.inject(502, times=10)
        given_back = world.desk("cli", "--once", "--brief", "down")
        assert given_back.returncode == 69, given_back.stderr
    world.merge_to_main("stale")
    rows = status_rows(world)
    assert rows["stale"]["state"] == "merged"
    assert "stuck" not in rows["stale"]["status_note"]  # it was, before the resume
    assert rows["down"]["state"] == "released"
    assert rows["down"]["status_note"].startswith("unavailable: ")
    for width in ("80", "120"):
        shown = world.assay("status", "--forge", world.url, extra={"COLUMNS": width})
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert max(len(line) for line in lines) <= int(width)
        assert any("compute:evidence.claimed" in line for line in lines)  # whole, one line
        assert not any(line.rstrip("│ ").endswith("compute:evidence") for line in lines)
        assert "unavailable: " in shown.stdout  # in the note column, or under the table


def status_rows(world: World) -> dict[str, dict[str, Any]]:
    done = world.assay("status", "--forge", world.url, "--json")
    assert done.returncode == 0, done.stderr
    return {row["id"]: row for row in json.loads(done.stdout)["briefs"]}
