"""Bad input: each gets its typed error, exit code and a message naming what is wrong;
no journal entry is lost or rewritten."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from assay.journal import JournalWriter, read_journal
from assay.journal.format import encode_line
from tests.conftest import AssayRunner, popen_assay
from tests.runtime.helpers import desk, wait_until

APPROVAL = desk("small.py:approval")


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def test_malformed_input_is_bad_input_and_writes_nothing(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    done = run_assay("run", APPROVAL, "--journal", str(tmp_path / "j"), "--input", "{not json")
    assert done.returncode == 65
    assert "--input is not valid JSON" in done.stderr
    assert not (tmp_path / "j").exists()
    as_json = run_assay("run", APPROVAL, "--journal", str(tmp_path / "j"), "--input", "[", "--json")
    assert json.loads(as_json.stdout)["status"] == "bad_input" and as_json.returncode == 65


def test_missing_file_or_function_names_it(tmp_path: Path, run_assay: AssayRunner) -> None:
    missing_fn = run_assay("run", desk("small.py:nope"), "--journal", str(tmp_path / "j"))
    assert missing_fn.returncode == 65
    assert "small.py: no function named 'nope'" in missing_fn.stderr
    missing_file = run_assay("run", "absent.py:main", "--journal", str(tmp_path / "j"))
    assert missing_file.returncode == 65 and "absent.py: no such file" in missing_file.stderr
    no_colon = run_assay("run", "desk.py", "--journal", str(tmp_path / "j"))
    assert no_colon.returncode == 2 and "PATH.py:FUNCTION" in no_colon.stderr


def test_a_journal_from_a_newer_format_version_is_refused(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = tmp_path / "j"
    journal.mkdir()
    raw, _ = encode_line({"v": 2, "seq": 1, "prev": "", "kind": "start", "run": "r", "fence": 0})
    (journal / "000001.jsonl").write_bytes(raw + b"\n")
    before = _snapshot(journal)
    done = run_assay("run", APPROVAL, "--journal", str(journal))
    assert done.returncode == 65
    assert (
        "000001.jsonl line 1: journal format version 2 is newer than this Assay reads (1)"
        in done.stderr
    )
    assert _snapshot(journal) == before


def test_an_edited_journal_is_corrupt_and_left_untouched(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = tmp_path / "j"
    assert run_assay("run", APPROVAL, "--journal", str(journal)).returncode == 75
    segment = journal / "000001.jsonl"
    segment.write_text(segment.read_text().replace('"ready"', '"READY"'))
    before = _snapshot(journal)
    for command in (("run", APPROVAL), ("history",), ("replay", APPROVAL)):
        done = run_assay(command[0], "--journal", str(journal), *command[1:])
        assert done.returncode == 6, (command, done.stderr)
        assert "000001.jsonl line 2: checksum mismatch" in done.stderr
    assert _snapshot(journal) == before


def test_a_torn_journal_is_recovered_and_reported(tmp_path: Path, run_assay: AssayRunner) -> None:
    journal = tmp_path / "j"
    assert run_assay("run", APPROVAL, "--journal", str(journal)).returncode == 75
    segment = journal / "000001.jsonl"
    complete = segment.read_bytes()
    segment.write_bytes(complete + b'{"fence":0,"kind":"wa')
    assert run_assay("approve", "--journal", str(journal)).returncode == 0
    done = run_assay("run", APPROVAL, "--journal", str(journal), "--json")
    assert done.returncode == 0, done.stderr
    assert "dropped a torn last line at 000001.jsonl line 4" in done.stderr
    assert segment.read_bytes().startswith(complete)
    assert not read_journal(journal).torn_line_dropped


def test_a_malformed_event_names_the_file_and_line(tmp_path: Path, run_assay: AssayRunner) -> None:
    journal = tmp_path / "j"
    assert run_assay("run", APPROVAL, "--journal", str(journal)).returncode == 75
    (journal / "events.jsonl").write_text('{"id": "e1", "kind": "launch"}\n')
    done = run_assay("run", APPROVAL, "--journal", str(journal))
    assert done.returncode == 65
    assert "events.jsonl line 1: field kind 'launch' is not one of" in done.stderr


def test_a_different_input_on_resume_diverges(tmp_path: Path, run_assay: AssayRunner) -> None:
    journal = str(tmp_path / "j")
    assert run_assay("run", APPROVAL, "--journal", journal, "--input", '{"a": 1}').returncode == 75
    done = run_assay("run", APPROVAL, "--journal", journal, "--input", '{"a": 2}')
    assert done.returncode == 5 and "input differs" in done.stderr


def test_approve_without_journal_is_a_usage_error(run_assay: AssayRunner) -> None:
    done = run_assay("approve", "brief-1")
    assert done.returncode == 2 and "--journal" in done.stderr
    assert run_assay("signal", "hello").returncode == 2


def test_a_lower_fence_is_fenced(tmp_path: Path, run_assay: AssayRunner) -> None:
    journal = tmp_path / "j"
    with JournalWriter.open(journal) as writer:
        writer.fence = 3
        writer.append({"kind": "takeover", "fence": 3, "prev_fence": 0})
    done = run_assay("run", APPROVAL, "--journal", str(journal), "--fence", "2")
    assert done.returncode == 4 and "fence 2 is older than the journal's fence 3" in done.stderr


def test_a_fenced_holder_leaves_even_a_torn_line_alone(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = tmp_path / "j"
    with JournalWriter.open(journal) as writer:
        writer.fence = 3
        writer.append({"kind": "takeover", "fence": 3, "prev_fence": 0})
    segment = journal / "000001.jsonl"
    segment.write_bytes(segment.read_bytes() + b'{"torn')
    before = _snapshot(journal)
    assert run_assay("run", APPROVAL, "--journal", str(journal), "--fence", "1").returncode == 4
    assert _snapshot(journal) == before


def test_a_second_process_on_the_same_journal_is_busy(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal, counter, marker = tmp_path / "j", tmp_path / "counter", tmp_path / "marker"
    args = [
        "run",
        desk("crash_desk.py:main"),
        "--journal",
        str(journal),
        "--input",
        json.dumps({"counter": str(counter), "effects": str(tmp_path / "effects")}),
        "--model",
        desk("crash_desk.py:make_model"),
    ]
    env = {"CRASH_COUNTER": str(counter), "CRASH_PAUSE": "3:after", "CRASH_MARKER": str(marker)}
    first = popen_assay(args, cwd=tmp_path, env=env)
    try:
        wait_until(marker.exists, what="the first run to hold the journal")
        before = _snapshot(journal)
        second = run_assay(*args, env={"CRASH_COUNTER": str(counter)})
        assert second.returncode == 3
        assert "another process is writing this journal" in second.stderr
        assert _snapshot(journal) == before
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    assert run_assay(*args, env={"CRASH_COUNTER": str(counter)}).returncode == 0


def test_replaying_an_absent_journal_says_so(tmp_path: Path, run_assay: AssayRunner) -> None:
    done = run_assay("replay", "--journal", str(tmp_path / "none"), APPROVAL)
    assert done.returncode == 65 and "no journal entries to replay" in done.stderr
