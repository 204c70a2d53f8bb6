"""Divergence: changed code is refused with an exact message (exit 5), or forked."""

from __future__ import annotations

from pathlib import Path

from assay.journal import read_journal
from tests.conftest import AssayRunner

V1 = """
def main(run, input):
    run.step("a", lambda: 1)
    run.step("b", lambda: 2)
    run.step("c", lambda: 3)
    run.wait_for("approval")
    return "done"
"""


def _desk(tmp_path: Path, source: str) -> str:
    path = tmp_path / "desk.py"
    path.write_text(source)
    return f"{path}:main"


def test_changed_code_exits_5_with_the_exact_message(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = str(tmp_path / "j")
    target = _desk(tmp_path, V1)
    assert run_assay("run", target, "--journal", journal).returncode == 75
    before = (tmp_path / "j" / "000001.jsonl").read_bytes()
    _desk(tmp_path, V1.replace('run.step("b", lambda: 2)', 'run.step("x", lambda: 2)'))
    done = run_assay("run", target, "--journal", journal)
    assert done.returncode == 5
    assert done.stderr.strip() == (
        "assay: diverged: step 2 was recorded as compute:b, the code asked for compute:x"
    )
    assert (tmp_path / "j" / "000001.jsonl").read_bytes() == before  # nothing written
    replay = run_assay("replay", "--journal", journal, target)
    assert replay.returncode == 5
    assert "step 2 was recorded as compute:b, the code asked for compute:x" in replay.stderr


def test_removed_steps_diverge_at_the_first_missing_position(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = str(tmp_path / "j")
    target = _desk(tmp_path, V1)
    assert run_assay("run", target, "--journal", journal).returncode == 75
    _desk(
        tmp_path,
        V1.replace('    run.step("c", lambda: 3)\n', "").replace(
            '    run.wait_for("approval")\n', ""
        ),
    )
    done = run_assay("run", target, "--journal", journal)
    assert done.returncode == 5
    assert "step 3 was recorded as compute:c, the code asked for the end of the run" in done.stderr


def test_fork_on_divergence_records_diverged_and_continues(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = str(tmp_path / "j")
    target = _desk(tmp_path, V1)
    assert run_assay("run", target, "--journal", journal).returncode == 75
    _desk(tmp_path, V1.replace('run.step("b", lambda: 2)', 'run.step("x", lambda: 2)'))
    forked = run_assay("run", target, "--journal", journal, "--fork-on-divergence")
    assert forked.returncode == 75, forked.stderr
    entries = read_journal(tmp_path / "j").entries
    diverged = [e for e in entries if e["kind"] == "diverged"]
    assert [(d["pos"], d["recorded"], d["requested"]) for d in diverged] == [
        (2, "compute:b", "compute:x")
    ]
    after = entries[entries.index(diverged[0]) + 1 :]
    assert [(e.get("pos"), e.get("name")) for e in after if e["kind"] == "step"] == [
        (2, "x"),
        (3, "c"),
    ]
    # the forked history is now what the code matches, without the flag
    assert run_assay("approve", "--journal", journal).returncode == 0
    assert run_assay("run", target, "--journal", journal).returncode == 0
    assert run_assay("replay", "--journal", journal, target).returncode == 0
