"""Compensation: reverse order after a failure; a crash during compensation resumes it."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from assay.journal import read_journal
from tests.conftest import AssayRunner, popen_assay
from tests.runtime.helpers import desk, wait_until

BOOKING = desk("small.py:booking")
EXPECTED = ["do a", "do b", "do c", "undo c", "undo b", "undo a"]


def _args(journal: Path, log: Path) -> list[str]:
    return [
        "run",
        BOOKING,
        "--journal",
        str(journal),
        "--input",
        json.dumps({"log": str(log)}),
        "--json",
    ]


def test_a_failure_after_three_effects_compensates_in_reverse_order(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal, log = tmp_path / "j", tmp_path / "log"
    done = run_assay(*_args(journal, log))
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "failed"
    assert result["output"]["error"]["message"] == "RuntimeError: the payment provider said no"
    assert log.read_text().splitlines() == EXPECTED
    entries = read_journal(journal).entries
    undone = [e["name"] for e in entries if e["kind"] == "compensate" and e["status"] == "ok"]
    assert undone == ["book-c", "book-b", "book-a"]
    assert [e["kind"] for e in entries][-2:] == ["error", "end"]
    again = run_assay(*_args(journal, log))  # a finished run reports its recorded end
    assert again.returncode == 1 and log.read_text().splitlines() == EXPECTED


def test_a_crash_during_compensation_resumes_without_running_any_twice(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal, log, marker = tmp_path / "j", tmp_path / "log", tmp_path / "marker"
    proc = popen_assay(
        _args(journal, log), cwd=tmp_path, env={"COMP_PAUSE": "b", "COMP_MARKER": str(marker)}
    )
    try:
        wait_until(marker.exists, what="compensation b to start")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert log.read_text().splitlines() == EXPECTED[:4]
    started = [e for e in read_journal(journal).entries if e["kind"] == "compensate"]
    assert [(e["name"], e["status"]) for e in started][-1] == ("book-b", "started")

    done = run_assay(*_args(journal, log))
    assert done.returncode == 1, done.stderr
    assert log.read_text().splitlines() == EXPECTED
