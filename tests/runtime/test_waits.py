"""Waits, approvals and signals for local runs, through the real CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from assay.journal import read_journal, summarize
from assay.runtime import Replayer
from tests.conftest import AssayRunner, popen_assay
from tests.runtime.desks import small
from tests.runtime.helpers import desk

APPROVAL = desk("small.py:approval")
STEERING = desk("small.py:steering")


def test_wait_for_exits_75_holding_no_process_then_approve_resumes(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = tmp_path / "j"
    proc = popen_assay(["run", APPROVAL, "--journal", str(journal), "--json"], cwd=tmp_path)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 75
    result = json.loads(stdout)
    assert (result["status"], result["waiting_for"]) == ("suspended", "approval")
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing of the run's process group is left
    summary = summarize(read_journal(journal))
    assert (summary.status, summary.waiting_for) == ("waiting", "approval")

    again = run_assay("run", APPROVAL, "--journal", str(journal), "--json")
    assert again.returncode == 75  # still no event: still waiting, one wait entry
    assert [e["kind"] for e in read_journal(journal).entries].count("wait") == 1

    done = run_assay("approve", "--journal", str(journal), "--note", "ship it")
    assert done.returncode == 0, done.stderr
    finished = run_assay("run", APPROVAL, "--journal", str(journal), "--json")
    assert finished.returncode == 0, finished.stderr
    output = json.loads(finished.stdout)["output"]
    assert output == {"prepared": "ready", "decision": "approve", "note": "ship it"}


def test_reject_also_ends_an_approval_wait(tmp_path: Path, run_assay: AssayRunner) -> None:
    journal = str(tmp_path / "j")
    assert run_assay("run", APPROVAL, "--journal", journal).returncode == 75
    assert run_assay("approve", "--journal", journal, "--reject").returncode == 0
    finished = run_assay("run", APPROVAL, "--journal", journal, "--json")
    assert json.loads(finished.stdout)["output"]["decision"] == "reject"


def test_a_signal_sent_twice_is_consumed_once_and_replays_at_its_drain(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = str(tmp_path / "j")
    assert run_assay("run", STEERING, "--journal", journal).returncode == 75
    for _ in range(2):
        assert run_assay("signal", "--journal", journal, "turn left", "--id", "s-1").returncode == 0
    assert run_assay("approve", "--journal", journal, "go").returncode == 0
    finished = run_assay("run", STEERING, "--journal", journal, "--json")
    assert finished.returncode == 0, finished.stderr
    expected = [[], ["turn left"], []]
    assert json.loads(finished.stdout)["output"] == expected

    # a signal delivered after the run does not change what replay sees at each drain
    assert run_assay("signal", "--journal", journal, "too late", "--id", "s-2").returncode == 0
    replay = Replayer(small.steering).replay(Path(journal))
    assert replay.matched and replay.finished and replay.output == expected
    drains = [e["events"] for e in read_journal(Path(journal)).entries if e["kind"] == "signal"]
    assert [[ev["text"] for ev in d] for d in drains] == expected
    cli = run_assay("replay", "--journal", journal, STEERING)
    assert cli.returncode == 0 and "matches" in cli.stdout


def test_sleep_suspends_on_a_timer(tmp_path: Path, run_assay: AssayRunner) -> None:
    journal = tmp_path / "j"
    done = run_assay("run", desk("small.py:napper"), "--journal", str(journal), "--json")
    assert done.returncode == 75
    assert json.loads(done.stdout)["waiting_for"] == "timer"
    wait = next(e for e in read_journal(journal).entries if e["kind"] == "wait")
    assert wait["sleep"] is True and wait["until"]
