"""A sweep SIGKILLed at many instants loses nothing.

A sweep acting on 40 expired claims used to mark all 40 stuck in one push, then write the
status records in another and the log entry in a third: killed in between, 34 notes were
lost for good (the next sweep saw nothing left to do). Now everything goes in one atomic
push, so after a kill at any instant every stuck claim has its status record and the sweep
log its entry, or nothing was written and the next sweep does it all.

The kill instants are real conditions, not sleeps: the child is killed once it has used
k/12 of the CPU a whole sweep used (read from /proc), for k = 1 … 14, spreading the kills
over its whole run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from assay.claims.record import ClaimRecord
from assay.forge import open_forge
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.conftest import assay_argv, assay_env
from tests.forge_fixtures import put_on_main, wait_until
from tests.sweep.helpers import brief_files, sweepers

COUNT = 40
KILLS = 14
OLD = "2026-01-01T00:00:00.000Z"


def _expired_claims(forge_path: Path, fence: int) -> None:
    """40 held claims renewed long ago, written in one push."""
    with open_forge(str(forge_path)) as forge:
        refs = forge.fetch(["refs/assay/claims/"])
        updates = []
        for index in range(COUNT):
            brief = f"b{index:02d}"
            record = ClaimRecord(
                brief=brief,
                desk="coder",
                holder=f"holder-{fence}-{index}",
                fence=fence,
                state="held",
                since=OLD,
                renewed_at=OLD,
                lease_s=1.0,
            )
            parent = refs.get(record.ref)
            commit = forge.commit(
                {"claim.json": record.to_bytes()},
                parents=[parent] if parent else [],
                message="claim",
                author=ASSAY_IDENTITY,
            )
            updates.append(RefUpdate(record.ref, commit, expected=parent))
        assert forge.push(updates, atomic=False).ok


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return -1
    return int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks


def _state(forge_path: Path) -> tuple[dict[str, dict], dict[str, dict], list[dict]]:
    """Claims, latest status per brief, and every sweep log entry, read fresh."""
    with open_forge(str(forge_path), cache_dir=forge_path.parent / "reader") as forge:
        refs = forge.fetch(["refs/assay/"])
        claims, statuses = {}, {}
        for ref, sha in refs.items():
            if ref.startswith("refs/assay/claims/"):
                claims[ref.rsplit("/", 1)[1]] = json.loads(
                    forge.read_blob(sha, "claim.json") or b""
                )
            elif ref.startswith("refs/assay/status/"):
                statuses[ref.rsplit("/", 1)[1]] = json.loads(
                    forge.read_blob(sha, "record.json") or b""
                )
        log: list[dict] = []
        tip = refs.get("refs/assay/sweeps/log")
        if tip:
            for commit in forge.history(tip):
                log.append(json.loads(forge.read_blob(commit, "record.json") or b""))
    return claims, statuses, log


def _check_nothing_lost(forge_path: Path) -> int:
    claims, statuses, log = _state(forge_path)
    logged = {
        (entry["sweep"], action["brief"])
        for entry in log
        for action in entry["actions"]
        if action["action"] == "mark-stuck"
    }
    stuck = [brief for brief, claim in claims.items() if claim["state"] == "stuck"]
    for brief in stuck:
        status = statuses.get(brief)
        assert status is not None and status["state"] == "stuck", (brief, status)
        claim = claims[brief]
        assert (status["fence"], status["holder"]) == (claim["fence"], claim["holder"]), brief
        assert (status["sweep"], brief) in logged, (brief, status["sweep"])
    return len(stuck)


@pytest.mark.slow
def test_a_sweep_killed_at_any_instant_leaves_every_stuck_claim_recorded(
    forge_path: Path, tmp_path: Path
) -> None:
    put_on_main(forge_path, brief_files(*(f"b{i:02d}" for i in range(COUNT))))
    policies = sweepers(tmp_path / "sweepers")
    env = assay_env({"ASSAY_CLAIM_SKEW": "0"})
    args = assay_argv("sweep", "--forge", str(forge_path), "--sweepers", str(policies), "--json")
    # One whole sweep first, to learn how much CPU a sweep of 40 claims takes here.
    _expired_claims(forge_path, fence=1)
    whole = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(whole.pid, 0)
    whole.returncode = os.waitstatus_to_exitcode(status)
    assert whole.returncode == 0
    total_ticks = (usage.ru_utime + usage.ru_stime) * os.sysconf("SC_CLK_TCK")
    assert _check_nothing_lost(forge_path) == COUNT
    outcomes: list[int] = []
    outcomes_note = "stuck claims after each kill"
    for k in range(1, KILLS + 1):
        _expired_claims(forge_path, fence=k + 1)  # re-arm: every claim held, expired again
        child = subprocess.Popen(
            args,
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        budget = int(total_ticks * k / (KILLS - 2))  # the last kills come after it finished
        wait_until(
            lambda child=child, budget=budget: (
                child.poll() is not None or _cpu_ticks(child.pid) >= budget
            ),
            timeout=120,
            what=f"the sweep to use {budget} clock ticks of CPU",
        )
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        outcomes.append(_check_nothing_lost(forge_path))
    # Kills landed both before and after the push in this run, or the test proved nothing.
    assert 0 in outcomes and COUNT in outcomes, (outcomes_note, outcomes)
    done = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _check_nothing_lost(forge_path) == COUNT
