"""A desk SIGKILLed mid-run: one sweep marks it stuck naming the last step, a second desk
resumes it, and the board tells the whole story. Real forge, real processes, real git."""

from __future__ import annotations

import json
from pathlib import Path

from assay.claims.store import ClaimStore
from assay.forge import open_forge
from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main, wait_until
from tests.sweep.helpers import (
    brief_files,
    kill_group,
    refs_of,
    start_worker,
    status_record,
    sweep_json,
    sweepers,
)


def _journal_reached(spec: str, brief: str, step: str) -> bool:
    from assay.board.source import read_snapshot

    with open_forge(spec) as forge:
        journal = read_snapshot(forge).journals.get(brief)
    return journal is not None and journal.last_step == step


def test_killed_desk_is_marked_stuck_resumed_and_shown_on_the_board(
    forge_path: Path, tmp_path: Path, run_assay: AssayRunner
) -> None:
    spec = str(forge_path)
    put_on_main(spec, brief_files("story"))
    policies = sweepers(tmp_path / "sweepers")

    first = start_worker(spec, "story", tmp_path / "w1", "--block", lease=1.0)
    try:
        wait_until(lambda: _journal_reached(spec, "story", "write"), what="the journal push")
        # Alive and renewing: a sweep now must not touch it.
        assert sweep_json(run_assay, "--sweepers", str(policies), "--forge", spec)["actions"] == []
    finally:
        kill_group(first)

    with open_forge(spec) as forge:
        store = ClaimStore(forge, skew_s=0)
        wait_until(lambda: store.status(store.get("story")) == "expired", what="lease expiry")

    swept = sweep_json(run_assay, "--sweepers", str(policies), "--forge", spec)
    [action] = swept["actions"]
    assert (action["action"], action["brief"], action["outcome"]) == ("mark-stuck", "story", "done")
    assert "desk tester" in action["note"] and "last step write at " in action["note"]
    assert swept["round_trips"] >= 1 and swept["claims"] == 1
    with open_forge(spec) as forge:
        record = ClaimStore(forge).get("story")
        assert record is not None and record.state == "stuck" and record.fence == 1
    status = status_record(spec, "story")
    assert status is not None
    assert (status["state"], status["last_step"], status["desk"]) == ("stuck", "write", "tester")
    assert status["silent_s"] > 0

    # Idempotent: the next sweep plans nothing and writes nothing.
    before = refs_of(forge_path)
    assert sweep_json(run_assay, "--sweepers", str(policies), "--forge", spec)["actions"] == []
    assert refs_of(forge_path) == before

    second = start_worker(spec, "story", tmp_path / "w2")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, out + err
    with open_forge(spec) as forge:
        record = ClaimStore(forge).get("story")
        assert record is not None and record.state == "done" and record.fence == 2

    board_md = tmp_path / "BOARD.md"
    board_html = tmp_path / "board.html"
    done = run_assay("board", "--out", str(board_md), "--html", str(board_html), "--forge", spec)
    assert done.returncode == 0, done.stderr
    line = next(x for x in board_md.read_text().splitlines() if x.startswith("| story |"))
    assert "| tester | 2/" in line  # the second holder's fence
    assert "stuck: desk tester" in line and "last step write" in line
    assert "## Done (1)" in board_md.read_text()

    status_out = run_assay("status", "--json", "--forge", spec)
    assert status_out.returncode == 0, status_out.stderr
    [row] = json.loads(status_out.stdout)["briefs"]
    assert (row["state"], row["fence"], row["last_step"]) == ("done", 2, "slow")
    assert len(row["sessions"]) == 2  # the killed process, then the one that resumed
    assert [s["fence"] for s in row["sessions"]] == [1, 2]
    assert row["steps"] >= 3
