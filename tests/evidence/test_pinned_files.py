"""Attack: the branch changes what the rows run instead of the code they test.

Main holds the acceptance test; the desk's ``add`` is wrong. Each attack used to make
``assay verify`` pass and ``assay merge`` merge: a branch ``unittest.py`` that prints OK,
the test file edited to assert nothing, a ``conftest.py`` that skips every test. The gate
now restores the rows' files from main at the brief's base and runs Python with the safe
path, so each fails, the review names the pinned files, and main does not move.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, git

PY = sys.executable
BRIEF_TEXT = f"""---
id: calc
title: Fix calc.add
verify:
  - id: unit
    run: {PY} -m unittest -q tests.test_calc
  - id: pytest
    run: {PY} -m pytest -q -p no:cacheprovider tests/test_calc.py
---
Make calc.add add.
"""
TEST = """import unittest

import calc


class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 2), 4)
"""
HOLLOW = TEST.replace("self.assertEqual(calc.add(2, 2), 4)", "pass")
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    made = Scene(tmp_path, brief_text=BRIEF_TEXT)
    for name, text in {
        "calc.py": WRONG,
        "tests/__init__.py": "",
        "tests/test_calc.py": TEST,
    }.items():
        path = made.author / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git("add", "-A", cwd=made.author)
    git("commit", "--quiet", "-m", "calc and its test", cwd=made.author)
    git("push", "--quiet", "origin", "main", cwd=made.author)
    git("pull", "--quiet", "--rebase", "origin", "main", cwd=made.desk)
    return made


def _verify_and_merge(scene: Scene, run_assay: AssayRunner) -> dict[str, object]:
    main_before = scene.main_sha()
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    merged = run_assay("merge", BRIEF, "--forge", str(scene.forge))
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert scene.main_sha() == main_before
    assert "pinned" in scene.review()["body"]
    return report


def test_the_right_code_still_passes_with_its_files_pinned(
    scene: Scene, run_assay: AssayRunner
) -> None:
    head = scene.desk_commit({"calc.py": RIGHT})
    scene.open_review(head)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert "tests/test_calc.py" in report["pinned"]
    assert "tests/__init__.py" in report["pinned"]
    assert run_assay("merge", BRIEF, "--forge", str(scene.forge)).returncode == 0


def test_a_branch_unittest_module_does_not_replace_the_real_one(
    scene: Scene, run_assay: AssayRunner
) -> None:
    fake = "print('OK')\nraise SystemExit(0)\n"
    head = scene.desk_commit({"unittest.py": fake, "pytest.py": fake})
    scene.open_review(head)
    report = _verify_and_merge(scene, run_assay)
    ran = {row["row"]: row for row in report["ran"]}  # type: ignore[attr-defined]
    assert ran["unit"]["exit"] != 0 and "FAILED" in ran["unit"]["output_tail"]


def test_an_edited_test_file_is_restored_from_main(scene: Scene, run_assay: AssayRunner) -> None:
    head = scene.desk_commit({"tests/test_calc.py": HOLLOW})
    scene.open_review(head)
    report = _verify_and_merge(scene, run_assay)
    assert "tests/test_calc.py" in report["pinned"]  # type: ignore[operator]


def test_a_conftest_that_skips_everything_is_removed(scene: Scene, run_assay: AssayRunner) -> None:
    skip_all = (
        "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        item.add_marker(pytest.mark.skip(reason='no'))\n"
    )
    head = scene.desk_commit({"conftest.py": skip_all, "tests/conftest.py": skip_all})
    scene.open_review(head)
    report = _verify_and_merge(scene, run_assay)
    assert {"conftest.py", "tests/conftest.py"} <= set(report["pinned"])  # type: ignore[arg-type]
    ran = {row["row"]: row for row in report["ran"]}  # type: ignore[attr-defined]
    assert ran["pytest"]["exit"] == 1


def test_protect_nothing_runs_the_branch_files(tmp_path: Path, run_assay: AssayRunner) -> None:
    scene = Scene(tmp_path, brief_text=BRIEF_TEXT.replace("---\nMake", "protect: []\n---\nMake"))
    head = scene.desk_commit(
        {"calc.py": RIGHT, "tests/__init__.py": "", "tests/test_calc.py": TEST}
    )
    scene.open_review(head)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["pinned"] == []
