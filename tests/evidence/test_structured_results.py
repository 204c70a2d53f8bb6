"""Attack: the code under test forges the runner's verdict instead of passing the tests.

Main holds a wrong ``calc.py`` and two tests that catch it, pinned. The desk leaves ``add``
wrong and makes the run look green from inside: ``os._exit(0)`` when imported, a no-op
``assertEqual``, a no-op ``TestResult.addFailure``. Each exits 0; the gate reads the
runner's own report and its tripwire, names the rule that failed, and main does not move.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF
from tests.evidence.test_acceptance_set import (
    RIGHT,
    TEST,
    WRONG,
    brief,
    gate_env,
    make_scene,
    refused,
    rows,
)

PY = sys.executable
UNITTEST = f"{PY} -m unittest -q tests.test_calc"
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider tests/test_calc.py"
FILES = {"tests/__init__.py": "", "tests/test_calc.py": TEST}
EXIT_AT_IMPORT = "import os\n\nos._exit(0)\n" + WRONG
NO_ASSERT_EQUAL = (
    "import unittest\n\nunittest.TestCase.assertEqual = lambda *a, **k: None\n\n" + WRONG
)
NO_ADD_FAILURE = (
    "import unittest\n\nunittest.TestResult.addFailure = lambda *a, **k: None\n\n" + WRONG
)


@pytest.mark.parametrize("row", [UNITTEST, PYTEST], ids=["unittest", "pytest"])
def test_an_exit_at_import_runs_none_of_mains_tests(
    tmp_path: Path, run_assay: AssayRunner, row: str
) -> None:
    scene = make_scene(tmp_path, brief(row), FILES)
    head = scene.desk_commit({"calc.py": EXIT_AT_IMPORT})
    scene.open_review(head)
    report = refused(scene, run_assay)
    status = rows(report)["r0"]
    assert status["exit"] == 0 and status["verdict"] == "failing"
    assert "started but never reported" in status["reason"]
    assert "(ran 0 of main's 2 tests)" in status["reason"]
    assert "ran 0 of main's 2 tests" in scene.review()["body"]


@pytest.mark.parametrize(
    "row, calc",
    [(UNITTEST, NO_ASSERT_EQUAL), (UNITTEST, NO_ADD_FAILURE), (PYTEST, NO_ASSERT_EQUAL)],
    ids=["assertEqual", "addFailure", "pytest-assertEqual"],
)
def test_a_patched_unittest_is_caught_by_the_tripwire(
    tmp_path: Path, run_assay: AssayRunner, row: str, calc: str
) -> None:
    scene = make_scene(tmp_path, brief(row), FILES)
    head = scene.desk_commit({"calc.py": calc})
    scene.open_review(head)
    report = refused(scene, run_assay)
    status = rows(report)["r0"]
    assert status["exit"] == 0 and status["verdict"] == "failing"
    assert "tripwire not reported: the runner's results cannot be trusted" in status["reason"]
    assert "row `r0`: tripwire not reported" in scene.review()["body"]


@pytest.mark.parametrize(
    "row", [UNITTEST, PYTEST, f"{PYTEST} -n 2"], ids=["unittest", "pytest", "pytest-xdist"]
)
@pytest.mark.slow
def test_the_right_code_passes_its_structured_check_and_the_tripwire_is_hidden(
    tmp_path: Path, run_assay: AssayRunner, row: str
) -> None:
    scene = make_scene(tmp_path, brief(row), FILES)
    head = scene.desk_commit({"calc.py": RIGHT})
    scene.open_review(head)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=gate_env(scene))
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(done.stdout)["ran"][0]
    assert record["runner"] == row.split(" -m ")[1].split()[0]
    assert "findings" not in record
    assert "failed" not in record["output_tail"].lower()  # the tripwire is not in the summary
    assert (
        run_assay("merge", BRIEF, "--forge", str(scene.forge), env=gate_env(scene)).returncode == 0
    )


def test_protect_nothing_lets_the_desk_write_its_own_tests_and_says_so(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    text = brief(UNITTEST, "test -f calc.py", extra="protect: []\n")
    scene = make_scene(tmp_path, text, {})
    head = scene.desk_commit({"calc.py": RIGHT, **FILES})
    scene.open_review(head)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=gate_env(scene))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["pinned"] == []
    body = scene.review()["body"]
    assert "protect: []: the desk writes its own tests" in body
    assert "r1: unstructured: judged by its exit code alone" in body
    assert (
        run_assay("merge", BRIEF, "--forge", str(scene.forge), env=gate_env(scene)).returncode == 0
    )
