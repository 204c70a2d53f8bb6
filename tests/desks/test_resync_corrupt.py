"""``assay resync`` on a forge with one corrupt journal reports every brief, naming it.

It used to exit 6 naming no brief and reporting none of the healthy ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from assay.forge import open_forge
from assay.journal import JournalWriter
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main

BRIEF = "---\nid: {id}\ntitle: Brief {id}\n---\nDo {id}.\n"


def _journal_files(directory: Path, brief: str) -> dict[str, bytes]:
    writer = JournalWriter.open(directory, run_id="r1")
    try:
        writer.append({"kind": "start", "desk": "coder"})
        writer.append({"kind": "step", "step": "compute", "pos": 0, "status": "ok", "out": {}})
    finally:
        writer.close()
    return {f".assay/journal/{brief}/{p.name}": p.read_bytes() for p in directory.glob("*.jsonl")}


def _push_branch(forge_path: Path, brief: str, files: dict[str, bytes]) -> None:
    with open_forge(str(forge_path)) as forge:
        commit = forge.commit(files, parents=[], message="work", author=ASSAY_IDENTITY)
        ref = f"refs/heads/assay/{brief}"
        assert forge.push([RefUpdate(ref, commit, expected=None)]).ok


def test_resync_reports_every_brief_and_names_the_corrupt_one(
    run_assay: AssayRunner, forge_path: Path, tmp_path: Path
) -> None:
    put_on_main(forge_path, {f"briefs/{b}.md": BRIEF.format(id=b) for b in ("good", "bad")})
    _push_branch(forge_path, "good", _journal_files(tmp_path / "j-good", "good"))
    files = _journal_files(tmp_path / "j-bad", "bad")
    name = next(iter(files))
    files[name] = files[name].replace(b'"compute"', b'"model"', 1)  # edited, sums not redone
    _push_branch(forge_path, "bad", files)

    done = run_assay("resync", "--forge", str(forge_path), "--json")
    assert done.returncode == 6, done.stdout + done.stderr
    rows = {row["brief"]: row for row in json.loads(done.stdout)["briefs"]}
    assert rows["good"]["state"] == "queued" and rows["good"]["steps"] == 1
    assert rows["bad"]["state"] == "invalid"
    assert rows["bad"]["problem"] == "journal: corrupt: 000001.jsonl line 2: checksum mismatch"
    table = run_assay("resync", "--forge", str(forge_path))
    assert table.returncode == 6
    assert "good" in table.stdout and "invalid: bad: journal: corrupt:" in table.stderr
