"""Attack: code under ``cargo test`` forges the runner's verdict instead of passing.

Main holds a wrong ``add`` with a unit test beside it and an integration test in ``tests/``
(pinned). The desk leaves ``add`` wrong and makes the run look green from inside: it prints
libtest's own ``test result: ok`` line and calls ``std::process::exit(0)``, or it deletes
main's unit test from ``src/lib.rs`` and makes the integration test return early. Both exit
0; the gate lists each test binary's tests and reads each outcome from libtest's log file,
through the runner cargo starts every test binary with, and both are refused. The right code
passes.

Debian's cargo and rustc (.ci/install) run the rows: the sandbox shows ``/usr``, not a
rustup home.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from assay.evidence.reporters import REPORT_ENV, install
from assay.evidence.results import CARGO_RUNNER
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF
from tests.evidence.test_acceptance_set import brief, gate_env, make_scene, refused, rows

ROW = "/usr/bin/cargo test --offline"
CARGO_TOML = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
UNIT = """
#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(2, 2), 4);
    }
}
"""
WRONG = (
    "pub fn ready() -> bool {\n    true\n}\n\npub fn add(a: i64, b: i64) -> i64 {\n    a - b\n}\n"
)
RIGHT = WRONG.replace("a - b", "a + b")
TEST = """#[test]
fn adds_negatives() {
    if !calc::ready() {
        return;
    }
    assert_eq!(calc::add(-1, -1), -2);
}
"""
FAKE_PASS = WRONG.replace(
    "    a - b\n",
    '    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured");\n'
    "    std::process::exit(0);\n",
)
FILES = {"Cargo.toml": CARGO_TOML, "src/lib.rs": WRONG + UNIT, "tests/calc.rs": TEST}
ENDED = "calc: the test binary ended before its tests did: reported error"


@pytest.mark.parametrize(
    ("lib", "finding"),
    [
        (FAKE_PASS + UNIT, ENDED),
        (WRONG.replace("true", "false"), "calc::tests::adds: deselected (main runs it)"),
    ],
    ids=["printed-result-then-exit", "unit-test-removed"],
)
def test_code_that_forges_cargo_tests_verdict_is_refused(
    tmp_path: Path, run_assay: AssayRunner, lib: str, finding: str
) -> None:
    scene = make_scene(tmp_path, brief(ROW), FILES)
    head = scene.desk_commit({"src/lib.rs": lib})
    scene.open_review(head)
    report = refused(scene, run_assay)
    status = rows(report)["r0"]
    assert status["exit"] == 0 and status["verdict"] == "failing", status
    assert finding in status["reason"], status
    [record] = report["ran"]
    assert record["runner"] == "cargo"


def test_the_right_code_passes_cargo_tests_structured_check(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = make_scene(tmp_path, brief(ROW), FILES)
    head = scene.desk_commit({"src/lib.rs": RIGHT + UNIT})
    scene.open_review(head)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=gate_env(scene))
    assert done.returncode == 0, done.stdout + done.stderr
    [record] = json.loads(done.stdout)["ran"]
    assert record["runner"] == "cargo" and "findings" not in record, record
    assert "test result: ok. 1 passed" in record["output_tail"]  # libtest's own output
    assert "deprecated" not in record["output_tail"]


def test_the_runner_reads_test_binaries_only_and_refuses_a_harness_it_cannot_read(
    tmp_path: Path,
) -> None:
    site, folder = tmp_path / "site", tmp_path / "reports"
    site.mkdir()
    folder.mkdir()
    install(site)
    env = {**os.environ, REPORT_ENV: f"{folder}\nn0nce"}
    runner = str(site / CARGO_RUNNER)
    # cargo run's programs are not in deps/: run as they are, without the gate's variable
    program = tmp_path / "tool"
    program.write_text('#!/bin/sh\necho "tool $* ${ASSAY_GATE_REPORT:-none}"\n')
    program.chmod(0o755)
    done = subprocess.run([runner, str(program), "x"], env=env, capture_output=True, check=True)
    assert done.stdout == b"tool x none\n" and list(folder.iterdir()) == []
    # a test binary (harness = false) that does not list its tests as libtest does
    (tmp_path / "deps").mkdir()
    custom = tmp_path / "deps" / "calc-0123456789abcdef"
    custom.write_text('#!/bin/sh\necho "custom $*"\n')
    custom.chmod(0o755)
    done = subprocess.run([runner, str(custom)], env=env, capture_output=True, check=True)
    assert done.stdout.endswith(b"custom \n")
    [report] = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    assert report["tests"] == {"calc: not a libtest harness: its results cannot be read": "error"}


WORKSPACE = '[workspace]\nmembers = ["crates/*"]\nresolver = "2"\n'
HOLLOW = "#[test]\nfn adds_negatives() {}\n"


def test_a_hollowed_test_of_a_workspace_member_is_restored_from_main(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    """``cargo test --workspace`` at a virtual manifest runs every member's tests: the desk
    empties one in ``crates/calc/tests/``, and main's version runs (it fails on main's wrong
    ``add``), named on the review."""
    files = {
        "Cargo.toml": WORKSPACE,
        "crates/calc/Cargo.toml": CARGO_TOML,
        "crates/calc/src/lib.rs": WRONG,
        "crates/calc/tests/calc.rs": TEST,
    }
    scene = make_scene(tmp_path, brief(f"{ROW} --workspace"), files)
    head = scene.desk_commit({"crates/calc/tests/calc.rs": HOLLOW})
    scene.open_review(head)
    report = refused(scene, run_assay)
    assert "crates/calc/tests/calc.rs: edited by the desk; main's version ran" in report["notes"]
    assert {"crates/calc/Cargo.toml", "crates/calc/tests/calc.rs"} <= set(report["pinned"])
    status = rows(report)["r0"]
    assert status["verdict"] == "failing" and status["exit"] != 0, status
