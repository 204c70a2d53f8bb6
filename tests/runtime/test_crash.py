"""Crash tests with real processes: SIGKILL a 30-step desk at many points, rerun to the end.

Each kill point is reached deterministically: the desk blocks at that point after writing
a marker file, and the test kills the process group once the marker exists. Afterwards the
run is resumed until done; every step whose result the journal held at the kill ran
exactly once, and the final output equals an uncrashed run's.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from assay.journal import read_journal, summarize
from tests.conftest import popen_assay
from tests.runtime.desks.crash_desk import STEPS, kind_of
from tests.runtime.helpers import desk, results_by_pos, wait_until

TARGET = desk("crash_desk.py:main")
MODEL = desk("crash_desk.py:make_model")


def _args(journal: Path, counter: Path, effects: Path) -> list[str]:
    given = json.dumps({"counter": str(counter), "effects": str(effects)})
    return ["run", TARGET, "--journal", str(journal), "--input", given, "--model", MODEL, "--json"]


def _env(counter: Path, **extra: str) -> dict[str, str]:
    return {"CRASH_COUNTER": str(counter), **extra}


def _finish(args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = popen_assay(args, cwd=cwd, env=env)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    result: dict[str, Any] = json.loads(stdout)
    return result


@pytest.fixture(scope="module")
def uncrashed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("uncrashed")
    counter, effects = base / "counter", base / "effects"
    result = _finish(_args(base / "journal", counter, effects), base, _env(counter))
    assert Counter(counter.read_text().split()) == Counter(str(i) for i in range(1, STEPS + 1))
    return result


# (pause point, description): inside steps of every kind, before and after their side
# effect; "after" on model and effect steps lies between the intent and result entries.
KILL_POINTS = [
    "1:before",  # inside the first step, before anything happened
    "3:after",  # inside a compute step after its side effect, result not written
    "5:before",  # model step: intent written, call not made
    "5:after",  # model step: between intent and result entries
    "7:before",  # effect step: intent fsynced, effect not made
    "7:after",  # effect step: effect made, result not written
    "16:before",  # just after the checkpoint
    "21:after",  # effect step late in the run
    "30:after",  # the last step
    "end",  # all steps done, the end entry not written
]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_at_a_point_then_resume_runs_completed_steps_once(
    point: str, tmp_path: Path, uncrashed: dict[str, Any]
) -> None:
    journal, counter, effects = tmp_path / "journal", tmp_path / "counter", tmp_path / "effects"
    marker = tmp_path / "marker"
    args = _args(journal, counter, effects)
    proc = popen_assay(
        args, cwd=tmp_path, env=_env(counter, CRASH_PAUSE=point, CRASH_MARKER=str(marker))
    )
    try:
        wait_until(marker.exists, what=f"the desk to reach {point}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    at_kill = read_journal(journal)
    done_at_kill = _completed_steps(at_kill.entries)
    counts_at_kill = Counter(counter.read_text().split()) if counter.exists() else Counter()
    if point != "end":
        step = point.split(":")[0]
        assert int(step) not in done_at_kill
        assert done_at_kill == set(range(1, int(step)))
        if kind_of(int(step)) != "compute":  # the kill fell between intent and result
            last = at_kill.entries[-1]
            assert (last["kind"], last["status"], last["step"]) == (
                "step",
                "started",
                kind_of(int(step)),
            )
    else:
        assert done_at_kill == set(range(1, STEPS + 1))

    result = _finish(args, tmp_path, _env(counter))
    assert result["output"] == uncrashed["output"]
    assert result["status"] == "ok" and result["code"] == 0

    counts = Counter(counter.read_text().split())
    for i in range(1, STEPS + 1):
        if i in done_at_kill:
            assert counts[str(i)] == 1, f"step {i} ran again after its result was recorded"
        else:
            assert counts[str(i)] == counts_at_kill[str(i)] + 1
    keys: dict[str, set[str]] = {}
    for line in effects.read_text().splitlines():
        i, key = line.split()
        keys.setdefault(i, set()).add(key)
    assert all(len(k) == 1 for k in keys.values()), keys  # a rerun effect reuses its key
    final = summarize(read_journal(journal))
    assert final.status == "done"


def _completed_steps(entries: list[dict[str, Any]]) -> set[int]:
    """Step numbers (1..30) whose result the journal records; model steps are every fifth."""
    done: set[int] = set()
    model_calls = 0
    for entry in results_by_pos(entries).values():
        if entry["step"] == "model":
            model_calls += 1
            done.add(5 * model_calls)
        else:
            done.add(int(entry["name"][1:]))
    return done
