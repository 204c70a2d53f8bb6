"""Attack: code under ``node --test`` forges the runner's verdict instead of passing.

Main holds a wrong ``calc.js`` and a test file that catches it, pinned. The desk leaves
``add`` wrong and makes the run look green from inside: ``process.exit(0)`` when the test
file requires it, or a no-op ``assert.strictEqual``. Both exit 0; the gate reads node's own
test events through its reporter, and each file's process proves it reached its end with
the tripwire, so both are refused. The right code passes with no finding.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF
from tests.evidence.test_acceptance_set import brief, gate_env, make_scene, refused, rows

NODE = shutil.which("node") or "node"  # .ci/install installs it (Codex's launcher needs it)
ROW = f"{NODE} --test test/calc.test.js"
TEST = """const test = require('node:test');
const assert = require('node:assert');
const { add } = require('../calc.js');

test('adds', () => { assert.strictEqual(add(2, 2), 4); });
test('adds negatives', () => { assert.strictEqual(add(-1, -1), -2); });
"""
WRONG = "exports.add = (a, b) => a - b;\n"
RIGHT = "exports.add = (a, b) => a + b;\n"
EXITS_WHEN_REQUIRED = "process.exit(0);\n" + WRONG
NO_STRICT_EQUAL = "require('node:assert').strictEqual = () => {};\n" + WRONG
FILES = {"calc.js": WRONG, "test/calc.test.js": TEST}
HOLLOW = "const test = require('node:test');\n\ntest('adds', () => {});\n"


@pytest.mark.parametrize(
    ("calc", "finding"),
    [
        (EXITS_WHEN_REQUIRED, "test/calc.test.js: ended before its tests did: reported error"),
        (NO_STRICT_EQUAL, "tripwire not reported: the runner's results cannot be trusted"),
    ],
    ids=["exit-when-required", "no-op-strictEqual"],
)
def test_code_that_forges_node_tests_verdict_is_refused(
    tmp_path: Path, run_assay: AssayRunner, calc: str, finding: str
) -> None:
    scene = make_scene(tmp_path, brief(ROW), FILES)
    head = scene.desk_commit({"calc.js": calc})
    scene.open_review(head)
    report = refused(scene, run_assay)
    status = rows(report)["r0"]
    assert status["exit"] == 0 and status["verdict"] == "failing", status
    assert finding in status["reason"]
    [record] = report["ran"]
    assert record["runner"] == "node:test"


def test_the_right_code_passes_node_tests_structured_check(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = make_scene(tmp_path, brief(ROW), FILES)
    head = scene.desk_commit({"calc.js": RIGHT})
    scene.open_review(head)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=gate_env(scene))
    assert done.returncode == 0, done.stdout + done.stderr
    [record] = json.loads(done.stdout)["ran"]
    assert record["runner"] == "node:test" and "findings" not in record
    assert "adds negatives" in record["output_tail"]  # node's own output is still shown


@pytest.mark.parametrize(
    ("row", "package"),
    [
        (f"{NODE} --test test/calc.js", '{"private": true}'),
        ("npm test", '{"private": true, "scripts": {"test": "node --test"}}'),
    ],
    ids=["file-on-the-command", "npm-test-script"],
)
def test_a_hollowed_test_file_node_runs_is_restored_from_main_and_named(
    tmp_path: Path, run_assay: AssayRunner, row: str, package: str
) -> None:
    """A test named on node's command (any name runs), or found by node's own default
    patterns behind ``npm test``'s script: the desk empties it, main's version runs."""
    files = {"test/calc.js": TEST, "package.json": package}
    scene = make_scene(tmp_path, brief(row), files)
    head = scene.desk_commit({"test/calc.js": HOLLOW})
    scene.open_review(head)
    report = refused(scene, run_assay)
    assert "test/calc.js: edited by the desk; main's version ran" in report["notes"]
    assert {"test/calc.js", "package.json"} <= set(report["pinned"])
    status = rows(report)["r0"]
    assert status["verdict"] == "failing" and status["exit"] != 0, status
    [record] = report["ran"]
    assert record["runner"] == "node:test"  # read from node's own report, through npm too
