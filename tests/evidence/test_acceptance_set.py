"""Attack: the branch edits what a row's runner would collect, where the row names no file.

Main holds ``calc.py`` with a wrong ``add`` and the tests that catch it; the desk leaves
``add`` wrong and guts the tests (or adds runner configuration that loads its own plugin).
Each row finds its tests by the runner's own discovery rules: a bare module name, ``discover
-p``, ``pytest`` with no arguments, ``make test``. The gate discovers the same files,
restores them from main at the base, names each one the desk changed, and the row fails.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from assay.evidence.discovery import Tree
from assay.evidence.pinning import plan_pins
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, git

PY = sys.executable
TEST = """import unittest

import calc


class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 2), 4)

    def test_add_negative(self):
        self.assertEqual(calc.add(-1, -1), -2)
"""
HOLLOW = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        pass\n"
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
EVIL_PLUGIN = """import os


def pytest_sessionfinish(session, exitstatus):
    os._exit(0)
"""
SKIP_ALL = (
    "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
    "    for item in items:\n        item.add_marker(pytest.mark.skip(reason='later'))\n"
)


def brief(*rows: str, extra: str = "") -> str:
    lines = "".join(f"  - id: r{i}\n    run: {row}\n" for i, row in enumerate(rows))
    return f"---\nid: calc\ntitle: Fix calc.add\nverify:\n{lines}{extra}---\nMake add add.\n"


def make_scene(root: Path, text: str, files: Mapping[str, str]) -> Scene:
    """A forge whose main has the brief, a wrong ``calc.py`` and ``files``."""
    scene = Scene(root, brief_text=text)
    for name, body in {"calc.py": WRONG, **files}.items():
        path = scene.author / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    git("add", "-A", cwd=scene.author)
    git("commit", "--quiet", "-m", "calc and its tests", cwd=scene.author)
    git("push", "--quiet", "origin", "main", cwd=scene.author)
    git("pull", "--quiet", "--rebase", "origin", "main", cwd=scene.desk)
    return scene


def gate_env(scene: Scene) -> dict[str, str]:
    return {"ASSAY_GATE_STATE": str(scene.root / "gate-state")}


def refused(scene: Scene, run_assay: AssayRunner) -> dict[str, Any]:
    """Verify (exit 1) and merge (refused, main unmoved); the verify report."""
    main_before = scene.main_sha()
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=gate_env(scene))
    assert done.returncode == 1, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    merged = run_assay("merge", BRIEF, "--forge", str(scene.forge), env=gate_env(scene))
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert scene.main_sha() == main_before
    return report


def rows(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["row"]: row for row in report["decision"]["rows"]}


@pytest.mark.parametrize(
    "row",
    [
        f"{PY} -m unittest test_calc",
        f'{PY} -m unittest discover -p "test_*.py"',
    ],
    ids=["bare-module", "discover-pattern"],
)
def test_an_edited_test_module_found_by_unittest_is_restored_and_named(
    tmp_path: Path, run_assay: AssayRunner, row: str
) -> None:
    scene = make_scene(tmp_path, brief(row), {"test_calc.py": TEST})
    head = scene.desk_commit({"test_calc.py": HOLLOW})
    scene.open_review(head)
    report = refused(scene, run_assay)
    assert "test_calc.py" in report["pinned"]
    assert "test_calc.py: edited by the desk; main's version ran" in report["notes"]
    assert rows(report)["r0"]["verdict"] == "failing"
    assert "test_calc.py: edited by the desk" in scene.review()["body"]


@pytest.mark.parametrize(
    "row, makefile",
    [
        (f"{PY} -m pytest -q -p no:cacheprovider", None),
        ("make test", f"PY = {PY}\n\ntest:\n\t$(PY) -m pytest -q -p no:cacheprovider\n"),
    ],
    ids=["pytest-no-arguments", "make-test"],
)
def test_an_edited_test_a_runner_collects_by_itself_is_restored_and_named(
    tmp_path: Path, run_assay: AssayRunner, row: str, makefile: str | None
) -> None:
    files = {"tests/__init__.py": "", "tests/test_calc.py": TEST}
    if makefile is not None:
        files["Makefile"] = makefile
    scene = make_scene(tmp_path, brief(row), files)
    head = scene.desk_commit({"tests/test_calc.py": HOLLOW, "tests/test_more.py": HOLLOW})
    scene.open_review(head)
    report = refused(scene, run_assay)
    assert "tests/test_calc.py: edited by the desk; main's version ran" in report["notes"]
    assert "tests/test_more.py: added by the desk; removed before the rows ran" in report["notes"]
    assert rows(report)["r0"]["verdict"] == "failing"
    assert rows(report)["r0"]["exit"] != 0  # make says 2 for a failed recipe


@pytest.mark.parametrize("config", ["tests/pytest.ini", ".pytest.ini", "tests/tox.ini"])
def test_runner_configuration_beside_the_tests_is_pinned(
    tmp_path: Path, run_assay: AssayRunner, config: str
) -> None:
    row = f"{PY} -m pytest -q -p no:cacheprovider tests/test_calc.py"
    files = {"tests/__init__.py": "", "tests/test_calc.py": TEST}
    scene = make_scene(tmp_path, brief(row), files)
    head = scene.desk_commit(
        {config: "[pytest]\naddopts = -p evilplug\n", "evilplug.py": EVIL_PLUGIN}
    )
    scene.open_review(head)
    report = refused(scene, run_assay)
    assert f"{config}: added by the desk; removed before the rows ran" in report["notes"]
    assert rows(report)["r0"]["exit"] == 1


def test_a_conftest_two_folders_down_that_skips_everything_is_removed(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    row = f"{PY} -m pytest -q -p no:cacheprovider tests"
    files = {"tests/__init__.py": "", "tests/unit/__init__.py": "", "tests/unit/test_calc.py": TEST}
    scene = make_scene(tmp_path, brief(row), files)
    head = scene.desk_commit({"tests/unit/conftest.py": SKIP_ALL})
    scene.open_review(head)
    report = refused(scene, run_assay)
    assert "tests/unit/conftest.py" in report["pinned"]
    assert rows(report)["r0"]["exit"] == 1


def test_the_right_code_passes_with_its_discovered_tests_pinned(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    row = f'{PY} -m unittest discover -p "test_*.py"'
    scene = make_scene(tmp_path, brief(row), {"test_calc.py": TEST})
    head = scene.desk_commit({"calc.py": RIGHT})
    scene.open_review(head)
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=gate_env(scene))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert "test_calc.py" in report["pinned"] and report["notes"] == []
    assert (
        run_assay("merge", BRIEF, "--forge", str(scene.forge), env=gate_env(scene)).returncode == 0
    )


def _plan(
    commands: list[str],
    main: set[str],
    branch: set[str] | None = None,
    texts: Mapping[str, str] | None = None,
) -> Any:
    return plan_pins(
        Tree(main),
        Tree(main if branch is None else branch),
        base="b",
        commands=commands,
        protect=None,
        read=lambda path: (texts or {}).get(path),
    )


def test_words_that_are_not_paths_are_not_read_as_modules() -> None:
    plan = _plan(["grep -qx HELLO hello.txt"], {"hello.txt", "hello/txt.py", "HELLO"})
    assert "hello.txt" in plan.pinned
    assert "hello/txt.py" not in plan.pinned and "hello/txt.py" not in plan.unpinned
    assert plan.unpinned == ()


def test_discovery_follows_each_runner_rule() -> None:
    main = {
        "pyproject.toml",
        "tests/pytest.ini",
        "tests/a/conftest.py",
        "tests/a/test_one.py",
        "tests/a/helper.py",
        "pkg/__init__.py",
        "pkg/test_mod.py",
        "go/x_test.go",
        "go/x.go",
        "go.work",
        "web/package.json",
        "web/src/a.test.ts",
        "web/src/__tests__/b.js",
        "web/src/c.js",
        "crate/Cargo.toml",
        "crate/tests/it.rs",
        "crate/src/lib.rs",
        "crate/.cargo/config.toml",
        "Makefile",
    }
    plan = _plan(
        [
            "pytest",
            "python3 -m unittest pkg.test_mod",
            "cd go && go test ./...",
            "cd web && npm test",
            "cd crate && cargo test",
        ],
        main,
        texts={"web/package.json": '{"scripts": {"test": "jest"}}'},
    )
    pinned = set(plan.pinned)
    assert {"tests/pytest.ini", "tests/a/conftest.py", "tests/a/test_one.py"} <= pinned
    assert {"pyproject.toml", "pkg/__init__.py", "pkg/test_mod.py", "go/x_test.go"} <= pinned
    assert {"web/package.json", "web/src/a.test.ts", "web/src/__tests__/b.js"} <= pinned
    assert {"crate/Cargo.toml", "crate/tests/it.rs", "crate/.cargo/config.toml"} <= pinned
    assert "go.work" in pinned
    assert not {"tests/a/helper.py", "go/x.go", "web/src/c.js", "crate/src/lib.rs"} & pinned
    assert set(plan.runners) == {"pytest", "unittest", "go", "node", "cargo", "npm", "jest"}


def test_a_go_row_reads_its_flags_values_as_values_not_packages() -> None:
    main = {"go.mod", "calc_test.go", "TestAdd/x_test.go", "sub/go.mod", "sub/a_test.go"}
    plan = _plan(["go test -run TestAdd -count 1"], main)
    assert {"go.mod", "calc_test.go"} <= set(plan.pinned)  # the current package, not TestAdd/
    assert "TestAdd/x_test.go" not in plan.pinned
    plan = _plan(["go test -C sub -v . -args TestAdd"], main)
    assert {"sub/go.mod", "sub/a_test.go"} <= set(plan.pinned)
    assert not {"calc_test.go", "TestAdd/x_test.go"} & set(plan.pinned)


def test_a_make_row_pins_what_the_targets_recipe_runs() -> None:
    makefile = (
        "PY ?= python3\nTESTS = tests/unit\n.PHONY: check\n\nall: build\nbuild:\n\techo build\n"
        "check: lint\n\t@$(PY) -m pytest -q $(TESTS)\nlint:\n\tgrep -q add calc.py\n"
    )
    main = {"Makefile", "calc.py", "tests/unit/test_a.py", "tests/other/test_b.py"}

    def plan(command: str) -> Any:
        return plan_pins(
            Tree(main),
            Tree(main),
            base="b",
            commands=[command],
            protect=None,
            read=lambda path: makefile if path == "Makefile" else None,
        )

    checked = plan("make check")
    assert {"Makefile", "calc.py", "tests/unit/test_a.py"} <= set(checked.pinned)
    assert "tests/other/test_b.py" not in checked.pinned
    assert checked.runners == ("make", "pytest")
    built = plan("make")
    assert built.pinned == ["Makefile"] and built.runners == ("make",)


def test_main_is_measured_only_for_rows_whose_tests_it_has() -> None:
    row = "python3 -m unittest -q tests.test_new"
    branch = {"tests/__init__.py", "tests/test_new.py"}
    written_by_the_desk = _plan([row], {"tests/__init__.py"}, branch)
    assert not written_by_the_desk.main_has_tests(row)
    assert written_by_the_desk.unpinned == ("tests/test_new.py",)
    assert _plan([row], branch).main_has_tests(row)
