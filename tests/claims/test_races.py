"""Sixteen real processes acquire one brief at the same instant: exactly one wins.

Runs over file://, git daemon and smart HTTP on 127.0.0.1. Every round has one winner
(exit 0) and fifteen losers (exit 3); rounds alternate between a brief nobody has claimed
(the create race) and a released brief (the fence + 1 take-over race). All racers share
one forge cache directory, so the test also checks that concurrent processes sharing a
cache do not corrupt it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from assay.claims import ClaimStore
from assay.forge import open_forge
from tests.conftest import assay_env

CONTENDERS = 16
# Each round is one create race and one take-over race; file:// is the cheapest transport,
# so it runs more rounds.
ROUNDS = {"file": 2, "git": 1, "http": 1}


def _racer(url: str, cwd: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "tests.claims.racer", "--forge", url, "--n", str(CONTENDERS)]
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=assay_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _round(racer: subprocess.Popen[str], brief: str) -> tuple[int, dict[str, object]]:
    assert racer.stdin is not None and racer.stdout is not None
    racer.stdin.write(brief + "\n")
    racer.stdin.flush()
    result = json.loads(racer.stdout.readline())
    codes = result["codes"]
    winners = [i for i, code in enumerate(codes) if code == 0]
    assert len(winners) == 1, f"round {brief}: exit codes {codes}"
    assert sorted(codes) == [0] + [3] * (CONTENDERS - 1), codes
    for i, output in enumerate(result["outputs"]):
        payload = json.loads(output)
        if i == winners[0]:
            assert payload["status"] == "ok"
        else:
            assert payload["status"] == "busy" and payload["code"] == 3
    won = json.loads(result["outputs"][winners[0]])
    return winners[0], won


def test_exactly_one_of_sixteen_wins_every_round(
    forge_url: str, forge_path: Path, tmp_path: Path, assay_state: Path
) -> None:
    racer = _racer(forge_url, tmp_path)
    try:
        with open_forge(forge_url) as forge:
            store = ClaimStore(forge)
            for number in range(ROUNDS[forge_url.split(":", 1)[0]]):
                brief = f"race-{number}"
                index, won = _round(racer, brief)
                record = store.get(brief)
                assert record is not None
                assert (record.desk, record.fence, record.state) == (f"racer-{index}", 1, "held")
                assert record.holder == won["holder"]
                # Release it, then race again: all sixteen now contend for fence 2.
                store.release(store.adopt(brief, record.holder))
                index, won = _round(racer, brief)
                record = store.get(brief)
                assert record is not None
                assert (record.desk, record.fence, record.attempt) == (f"racer-{index}", 2, 2)
                assert won["fence"] == 2
    finally:
        assert racer.stdin is not None
        racer.stdin.close()
        assert racer.wait(timeout=60) == 0
        assert racer.stdout is not None
        racer.stdout.close()
    for repo in [forge_path, *sorted((assay_state / "cache").iterdir())]:
        if repo.is_dir():
            fsck = subprocess.run(
                ["git", f"--git-dir={repo}", "fsck", "--no-dangling"],
                capture_output=True,
                text=True,
                check=False,
            )
            assert fsck.returncode == 0, f"{repo}: {fsck.stdout}{fsck.stderr}"
