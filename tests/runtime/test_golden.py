"""Golden journals: recorded once by ``make_golden.py``, replayed against the desk's code.

They pin the format (a reader that stops accepting them breaks old journals) and the
replay rules (the same code must keep matching its recorded history).
"""

from __future__ import annotations

from pathlib import Path

from assay.errors import Diverged
from assay.journal import read_journal, summarize
from assay.runtime import Replayer
from tests.conftest import AssayRunner
from tests.runtime.desks import golden_desk
from tests.runtime.helpers import desk
from tests.runtime.make_golden import GOLDEN

APPROVED = GOLDEN / "approved"


def test_the_golden_journal_verifies_and_summarizes() -> None:
    journal = read_journal(APPROVED)
    summary = summarize(journal)
    assert (summary.status, summary.steps, summary.model_calls, summary.tokens) == (
        "done",
        4,
        2,
        62,
    )
    assert summary.fence == 1 and summary.head == journal.head
    assert [e["kind"] for e in journal.entries].count("wake") == 1


def test_the_desk_replays_its_golden_journal_to_the_recorded_output() -> None:
    result = Replayer(golden_desk.main).replay(APPROVED)
    assert result.matched and result.finished
    assert result.output == {
        "decision": "approve",
        "steering": ["keep it short"],
        "published": True,
    }


def test_reordered_code_diverges_with_the_exact_message(run_assay: AssayRunner) -> None:
    result = Replayer(golden_desk.main_reordered).replay(APPROVED)
    assert isinstance(result.failure, Diverged)
    assert (
        result.failure.message == "step 1 was recorded as model, the code asked for tool:write_file"
    )
    cli = run_assay("replay", "--journal", str(APPROVED), desk("golden_desk.py:main_reordered"))
    assert cli.returncode == 5
    assert "step 1 was recorded as model, the code asked for tool:write_file" in cli.stderr


def test_history_prints_the_golden_journal(run_assay: AssayRunner, tmp_path: Path) -> None:
    table = run_assay("history", "--journal", str(APPROVED))
    assert table.returncode == 0
    assert "tool:write_file" in table.stdout and "for approval" in table.stdout
    lines = run_assay("history", "--journal", str(APPROVED), "--json").stdout.splitlines()
    assert len(lines) == len(read_journal(APPROVED).entries)
