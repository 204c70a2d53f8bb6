"""Attack: code under ``go test`` forges the runner's verdict instead of passing.

Main holds a wrong ``Add`` and the tests that catch it, pinned. The desk leaves ``Add``
wrong and makes the run look green from inside: a ``Setup`` (main's ``TestMain`` calls it
before ``m.Run``) that prints ``go test``'s own pass lines and exits 0 before any test runs
(``go test`` itself says ``ok``), ``syscall.Exit(0)`` in the middle of a test
(past ``go test``'s own check of ``os.Exit(0)``), an ``init`` that deselects every test
through testing's flags, or a ``Ready`` that makes main's tests skip themselves. Each exits
0 or is caught as it runs; the gate reads each test binary's status through its own
``-exec`` program, which knows a binary that finished ``M.Run`` from one that stopped, and
each is refused. The right code passes with no finding.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from assay.evidence.reporters import REPORT_ENV, install
from assay.evidence.reporters import assay_gate_go_exec as go_exec
from assay.evidence.results import GO_EXEC
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF
from tests.evidence.test_acceptance_set import brief, gate_env, make_scene, refused, rows

GO = shutil.which("go") or "go"  # .ci/install installs it (Debian's golang-go)
ROW = f"{GO} test ./..."
TEST = """package calc

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	Setup()
	os.Exit(m.Run())
}

func TestAdd(t *testing.T) {
	if !Ready() {
		t.Skip("not ready")
	}
	if got := Add(2, 2); got != 4 {
		t.Fatalf("Add(2, 2) = %d", got)
	}
}

func TestAddNegative(t *testing.T) {
	if !Ready() {
		t.Skip("not ready")
	}
	if got := Add(-1, -1); got != -2 {
		t.Fatalf("Add(-1, -1) = %d", got)
	}
}
"""
WRONG = """package calc

func Setup() {}

func Ready() bool { return true }

func Add(a, b int) int { return a - b }
"""
RIGHT = WRONG.replace("a - b", "a + b")
FAKE_PASS = WRONG.replace(
    "func Setup() {}\n",
    """import (
	"fmt"
	"os"
)

func Setup() {
	fmt.Print("=== RUN   TestAdd\\n--- PASS: TestAdd (0.00s)\\n")
	fmt.Print("=== RUN   TestAddNegative\\n--- PASS: TestAddNegative (0.00s)\\nPASS\\n")
	os.Exit(0)
}
""",
)
EXIT_MID_TEST = WRONG.replace(
    "{ return a - b }", "{\n\tsyscall.Exit(0)\n\treturn a - b\n}"
).replace("package calc\n", 'package calc\n\nimport "syscall"\n')
DESELECT = WRONG.replace(
    "package calc\n",
    """package calc

import (
	"flag"
	"testing"
)

func init() {
	testing.Init()
	flag.Set("test.run", "^$")
}
""",
)
NOT_READY = WRONG.replace("return true", "return false")
FILES = {"go.mod": "module example.com/calc\n\ngo 1.19\n", "calc.go": WRONG, "calc_test.go": TEST}
ENDED = "example.com/calc: the test binary ended before its tests did: reported error"


@pytest.mark.parametrize(
    ("calc", "exit", "finding"),
    [
        (FAKE_PASS, 0, ENDED),
        (EXIT_MID_TEST, 0, ENDED),
        (DESELECT, 1, "example.com/calc::TestAdd"),
        (NOT_READY, 0, "ran 0 of main's 2 tests"),
    ],
    ids=["pass-lines-then-exit-in-TestMain", "syscall-exit-mid-test", "deselect-from-init", "skip"],
)
def test_code_that_forges_go_tests_verdict_is_refused(
    tmp_path: Path, run_assay: AssayRunner, calc: str, exit: int, finding: str
) -> None:
    scene = make_scene(tmp_path, brief(ROW), FILES)
    head = scene.desk_commit({"calc.go": calc})
    scene.open_review(head)
    report = refused(scene, run_assay)
    status = rows(report)["r0"]
    assert status["exit"] == exit and status["verdict"] == "failing", status
    [record] = report["ran"]
    assert record["runner"] == "go"
    if exit == 0:  # a green exit: the reading of the runner's own status is what refused it
        assert finding in status["reason"], status
    else:  # the tests ran after all (testing's flags were set again on its command line)
        assert "--- FAIL: TestAdd" in record["output_tail"]


def test_the_right_code_passes_go_tests_structured_check(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = make_scene(tmp_path, brief(ROW), FILES)
    head = scene.desk_commit({"calc.go": RIGHT})
    scene.open_review(head)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=gate_env(scene))
    assert done.returncode == 0, done.stdout + done.stderr
    [record] = json.loads(done.stdout)["ran"]
    assert record["runner"] == "go" and "findings" not in record, record
    assert "ok  \texample.com/calc" in record["output_tail"]  # go test's own output is shown


POISONS_THE_CACHE = RIGHT.replace(
    "package calc\n",
    """package calc

import (
	"os"
	"path/filepath"
)

func init() {
	dir := os.Getenv("GOCACHE")
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			os.WriteFile(path, []byte("poisoned"), 0o644)
		}
		return nil
	})
	os.WriteFile(filepath.Join(dir, "poisoned"), []byte("x"), 0o644)
}
""",
)


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_go_row_starts_from_main_s_build_cache_and_cannot_write_it(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    """Main's run at the base fills a build cache the gate keeps; each row builds from a
    private copy of it, so code that rewrites every file of its GOCACHE changes nothing the
    next row (or the next verify) starts from."""
    scene = make_scene(tmp_path, brief(ROW), FILES)
    seed = scene.root / "gate-state" / "go-build" / str(scene.main_sha())
    for index in range(2):
        head = scene.desk_commit({"calc.go": POISONS_THE_CACHE, "n.txt": str(index)})
        scene.open_review(head)
        done = run_assay(
            "verify", BRIEF, "--forge", str(scene.forge), "--json", env=gate_env(scene)
        )
        assert done.returncode == 0, done.stdout + done.stderr
        if index == 0:
            kept = _digest(seed)
            assert len(kept) > 10 and "poisoned" not in kept  # main's run filled it
    assert _digest(seed) == kept


def test_the_go_program_reads_status_lines_worst_first_and_framed_ones_only_when_framed() -> None:
    lines = (
        b"=== RUN   TestA\n--- PASS: TestA (0.00s)\n"  # printed by the code under test
        b"--- SKIP: TestA (0.00s)\n"  # testing's own line
        b"--- PASS: TestA (0.00s)\n"  # printed again, after it
        b"=== RUN   TestB\n=== RUN   TestB/sub\n    --- FAIL: TestB/sub (0.01s)\n"
        b"--- FAIL: TestB (0.01s)\n=== RUN   TestC\n"
    )
    out = io.BytesIO()
    tests = go_exec.read_status(io.BytesIO(lines), out, "example.com/x", framed=False)
    assert out.getvalue() == lines  # everything passes through to go test
    assert tests == {
        "example.com/x::TestA": "skipped",
        "example.com/x::TestB": "failed",
        "example.com/x::TestB/sub": "failed",
        "example.com/x::TestC": "error",  # started, never told
    }
    framed = b"--- PASS: TestA (0.00s)\n\x16=== RUN   TestB\n\x16--- FAIL: TestB (0.00s)\n"
    tests = go_exec.read_status(io.BytesIO(framed), io.BytesIO(), "x", framed=True)
    assert tests == {"x::TestB": "failed"}


def test_the_go_program_runs_go_runs_programs_as_they_are(tmp_path: Path) -> None:
    site, folder = tmp_path / "site", tmp_path / "reports"
    site.mkdir()
    folder.mkdir()
    install(site)
    program = tmp_path / "main"  # go run's binary: not a pkg.test
    program.write_text('#!/bin/sh\necho "main $* ${ASSAY_GATE_REPORT:-none}"\n')
    program.chmod(0o755)
    env = {**os.environ, REPORT_ENV: f"{folder}\nn0nce"}
    done = subprocess.run(
        [str(site / GO_EXEC), str(program), "a"], env=env, capture_output=True, check=True
    )
    assert done.stdout == b"main a none\n" and list(folder.iterdir()) == []
