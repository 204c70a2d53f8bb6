"""Rows that hang or flood their output, run by the gate and recorded on the forge."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from assay.evidence.gate import verify
from assay.evidence.runner import TAIL_BYTES
from assay.forge import open_forge
from tests.evidence.gatekit import BRIEF, Scene, git

BRIEF_TEXT = """---
id: calc
title: Rows that misbehave
verify:
  - id: hang
    run: sleep 600
    timeout: 1
  - id: loud
    run: python3 loud.py
    timeout: 120
---
Body.
"""

LOUD = (
    "import sys\n"
    "block = (b'y' * 1023 + b'\\n') * 1024\n"
    "for _ in range(50):\n"
    "    sys.stdout.buffer.write(block)\n"
    "print('the end')\n"
)


def test_a_hanging_row_is_killed_and_a_loud_row_is_digested(tmp_path: Path) -> None:
    scene = Scene(tmp_path, brief_text=BRIEF_TEXT)
    head = scene.desk_commit({"loud.py": LOUD})
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        report = verify(forge, BRIEF, verifier="gate:ci")
    assert not report.passed
    assert report.head_sha == head

    commits = scene.evidence_commits()
    assert len(commits) == 2
    hang, loud = (
        json.loads(git("--git-dir", str(scene.forge), "show", f"{sha}:record.json"))
        for sha in commits
    )
    assert hang["row"] == "hang"
    assert hang["timed_out"] is True
    assert hang["exit"] == -9
    assert hang["seconds"] < 30

    expected = hashlib.sha256()
    block = (b"y" * 1023 + b"\n") * 1024
    for _ in range(50):
        expected.update(block)
    expected.update(b"the end\n")
    assert loud["exit"] == 0
    assert loud["output_bytes"] == 50 * 1024 * 1024 + len(b"the end\n")
    assert loud["output_sha256"] == "sha256:" + expected.hexdigest()
    assert loud["output_tail"].endswith("the end")
    assert len(loud["output_tail"].encode()) <= TAIL_BYTES
    verdicts = {s.row: s.verdict.value for s in report.decision.rows}
    assert verdicts == {"hang": "failing", "loud": "pass"}
