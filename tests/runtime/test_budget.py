"""Budgets: exhausting model calls pauses (exit 7); raising the budget continues."""

from __future__ import annotations

import json
from pathlib import Path

from assay.journal import read_journal, summarize
from tests.conftest import AssayRunner
from tests.runtime.helpers import desk

CHATTY = desk("small.py:chatty")
MODEL = desk("small.py:make_echo_model")


def test_model_call_budget_pauses_then_continues_from_the_same_step(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal, counter = tmp_path / "j", tmp_path / "model-calls"
    env = {"MODEL_COUNTER": str(counter)}
    args = ("run", CHATTY, "--journal", str(journal), "--model", MODEL, "--json")
    paused = run_assay(*args, "--max-model-calls", "2", env=env)
    assert paused.returncode == 7, paused.stderr
    assert json.loads(paused.stdout)["status"] == "paused"
    entries = read_journal(journal).entries
    budget = [e for e in entries if e["kind"] == "budget"]
    assert len(budget) == 1 and budget[0]["limit"] == "model_calls" and budget[0]["max"] == 2
    assert summarize(read_journal(journal)).status == "paused"
    assert len(counter.read_text().split()) == 2

    done = run_assay(*args, "--max-model-calls", "4", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == [
        "echo turn 0",
        "echo turn 1",
        "echo turn 2",
        "echo turn 3",
    ]
    # each model call was made once; the third one sits at the position the pause named
    assert counter.read_text().split() == ["2", "4", "6", "8"]
    final = read_journal(journal).entries
    model_positions = [
        e["pos"] for e in final if e.get("step") == "model" and e.get("status") == "ok"
    ]
    assert model_positions[2] == budget[0]["at"]


def test_a_step_budget_pauses_too(tmp_path: Path, run_assay: AssayRunner) -> None:
    journal = tmp_path / "j"
    args = ("run", CHATTY, "--journal", str(journal), "--model", MODEL)
    assert run_assay(*args, "--max-steps", "1").returncode == 7
    assert run_assay(*args, "--max-tokens", "5").returncode == 7
    assert run_assay(*args).returncode == 0
