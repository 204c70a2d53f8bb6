"""Each row runs in a tree of its own: code one row runs cannot rewrite what the next judges.

A row runs the code under test, with the tree writable (test runners write caches and
builds there). In one shared tree, the code imported by the first row could replace the
second row's pinned test, or the module it tests, and the second row would pass on files
the commit never held. Through ``assay verify`` and ``assay merge`` on a real forge.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, git

TWO_ROWS = """---
id: calc
title: Add calc.add and calc.mul
verify:
  - id: add
    run: python3 check_add.py
  - id: mul
    run: python3 check_mul.py
env: {python: "3", lock: requirements.lock}
---
Add add(a, b) and mul(a, b) to calc.py.
"""
CHECK_ADD = "import calc\nassert calc.add(2, 2) == 4\nprint('ok')\n"
CHECK_MUL = "import calc\nassert calc.mul(3, 4) == 12, 'mul is wrong'\nprint('ok')\n"
# add works, mul does not; imported by the first row, it rewrites the second row's test.
TAMPERING = (
    "import pathlib\n\n"
    "pathlib.Path(__file__).with_name('check_mul.py').write_text(\"print('ok')\\n\")\n\n\n"
    "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return 0\n"
)


def test_code_a_row_ran_cannot_rewrite_the_next_rows_test(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = Scene(tmp_path, brief_text=TWO_ROWS)
    scene.author_push({"check_add.py": CHECK_ADD, "check_mul.py": CHECK_MUL}, message="checks")
    git("fetch", "--quiet", "origin", cwd=scene.desk)  # the desk starts from that main
    git("reset", "--quiet", "--hard", "origin/main", cwd=scene.desk)
    head = scene.desk_commit({"calc.py": TAMPERING}, claims={"add": "pass", "mul": "pass"})
    scene.open_review(head)
    verified = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    assert verified.returncode == 1, verified.stdout + verified.stderr
    rows = {row["row"]: row for row in json.loads(verified.stdout)["decision"]["rows"]}
    assert rows["add"]["verdict"] == "pass"
    assert rows["mul"]["verdict"] == "failing"  # main's check_mul.py ran, not the rewrite
    before = scene.main_sha()
    merged = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json")
    assert merged.returncode == 1 and scene.main_sha() == before
