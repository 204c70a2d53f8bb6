"""Attack: code under jest or vitest forges the runner's verdict instead of passing.

Main holds a wrong ``add`` and a test file that catches it, pinned. The desk leaves ``add``
wrong and makes the run look green from inside, one commit at a time: ``process.exit(0)``
when the test file loads it, an ``expect`` whose ``toBe`` always passes (patched from the
code under test), and the test file emptied on the branch. The gate reads each runner's
own report (jest's results processor, vitest's reporter, both in the runner's own process)
with a tripwire test in every file, so each is refused; the right code passes with no
finding and merges. The runners are the pinned jest and vitest ``.ci/install`` puts under
``.venv/js-runners``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene
from tests.evidence.test_acceptance_set import brief, gate_env, make_scene, rows

BIN = Path(sys.executable).parent.parent / "js-runners" / "node_modules" / ".bin"
JEST_TEST = """const { add } = require('../calc.js');

test('adds', () => { expect(add(2, 2)).toBe(4); });
describe('negatives', () => {
  test('adds them', () => { expect(add(-1, -1)).toBe(-2); });
});
"""
VITEST_TEST = """import { describe, expect, test } from 'vitest';
import { add } from '../calc.js';

test('adds', () => { expect(add(2, 2)).toBe(4); });
describe('negatives', () => {
  test('adds them', () => { expect(add(-1, -1)).toBe(-2); });
});
"""
HOLLOW = {
    "jest": "test('adds', () => {});\n",
    "vitest": "import { test } from 'vitest';\n\ntest('adds', () => {});\n",
}
EXPORT = {
    "jest": "exports.add = (a, b) => a {op} b;\n",
    "vitest": "export const add = (a, b) => a {op} b;\n",
}
# What the desk puts before its wrong add.
EXITS = "process.exit(0);\n"
PATCHES_EXPECT = {
    # jest runs the module in the test file's context, where `expect` is a global
    "jest": "globalThis.expect.extend({ toBe: () => ({ pass: true, message: () => '' }) });\n",
    "vitest": (
        "import { expect } from 'vitest';\n\n"
        "expect.extend({ toBe: () => ({ pass: true, message: () => '' }) });\n"
    ),
}
SETUP = {
    "jest": {"package.json": '{"private": true}', "test/calc.test.js": JEST_TEST},
    "vitest": {
        "package.json": '{"private": true, "type": "module"}',
        "test/calc.test.js": VITEST_TEST,
    },
}
ROW = {"jest": f"{BIN / 'jest'} --ci", "vitest": f"{BIN / 'vitest'} run"}


def verify_at(scene: Scene, run_assay: AssayRunner, sha: str) -> dict[str, Any]:
    done = run_assay(
        "verify", BRIEF, "--sha", sha, "--forge", str(scene.forge), "--json", env=gate_env(scene)
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["jest", "vitest"])
def test_code_that_forges_jest_or_vitest_verdict_is_refused_and_the_right_code_merges(
    tmp_path: Path, run_assay: AssayRunner, runner: str
) -> None:
    assert (BIN / runner).exists(), f"{BIN / runner} is missing: run .ci/install"
    wrong = EXPORT[runner].replace("{op}", "-")
    scene = make_scene(tmp_path, brief(ROW[runner]), {**SETUP[runner], "calc.js": wrong})
    # make_scene wrote calc.py for the Python tests; main's calc.js is the wrong one
    exits = scene.desk_commit({"calc.js": EXITS + wrong}, message="exit at import")
    patched = scene.desk_commit({"calc.js": PATCHES_EXPECT[runner] + wrong}, message="expect")
    hollow = scene.desk_commit(
        {"calc.js": wrong, "test/calc.test.js": HOLLOW[runner]}, message="empty the test"
    )
    right = scene.desk_commit(
        {
            "calc.js": EXPORT[runner].replace("{op}", "+"),
            "test/calc.test.js": SETUP[runner]["test/calc.test.js"],
        },
        message="add",
    )

    exited = rows(verify_at(scene, run_assay, exits))["r0"]
    assert exited["verdict"] == "failing", exited
    if runner == "jest":  # jest runs a lone file in its own process: the exit ends the run
        assert exited["exit"] == 0
        assert "jest started but never reported: the run was cut short" in exited["reason"]
        assert "(ran 0 of main's 2 tests)" in exited["reason"]
    else:  # vitest's workers refuse process.exit: the file fails to load, and says so
        assert exited["exit"] == 1 and "ran 0 of main's 2 tests" in exited["reason"]

    forged = rows(verify_at(scene, run_assay, patched))["r0"]
    assert forged["exit"] == 0 and forged["verdict"] == "failing", forged
    assert "tripwire not reported: the runner's results cannot be trusted" in forged["reason"]

    emptied = verify_at(scene, run_assay, hollow)
    assert "test/calc.test.js: edited by the desk; main's version ran" in emptied["notes"]
    assert rows(emptied)["r0"]["verdict"] == "failing"

    scene.open_review(right)
    passed = verify_at(scene, run_assay, right)
    [record] = passed["ran"]
    assert passed["passed"] and record["runner"] == runner and "findings" not in record, record
    merged = run_assay("merge", BRIEF, "--forge", str(scene.forge), env=gate_env(scene))
    assert merged.returncode == 0, merged.stdout + merged.stderr
