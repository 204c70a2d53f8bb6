"""Discovery, rule by rule, through the pin planner: what each runner would collect and read.

Each case is a row, main's files (and the text of those discovery reads: a ``package.json``,
a ``go.mod``, a ``Cargo.toml``, a makefile) and what the gate must pin. A test file a row's
runner would run that the plan misses is one a desk could hollow out.
"""

from __future__ import annotations

from collections.abc import Mapping

from assay.evidence.discovery import Tree
from assay.evidence.discovery.js import glob_regex, node_test_file
from assay.evidence.pinning import PinPlan, plan_pins


def plan(
    command: str,
    main: set[str],
    texts: Mapping[str, str] | None = None,
    branch: set[str] | None = None,
) -> PinPlan:
    return plan_pins(
        Tree(main),
        Tree(main if branch is None else branch),
        base="b",
        commands=[command],
        protect=None,
        read=lambda path: (texts or {}).get(path),
    )


# -- node --test ----------------------------------------------------------------------------

NODE_TREE = {
    "package.json",
    "calc.js",
    "test/calc.js",
    "test/helpers/fixture.mjs",
    "lib/sum.test.mjs",
    "lib/sum-test.cjs",
    "lib/sum_test.js",
    "lib/test-sum.js",
    "lib/test.js",
    "lib/sum.js",
    "lib/sum.spec.js",
    "node_modules/dep/test/x.js",
    "setup.mjs",
}


def test_node_test_with_no_target_pins_nodes_default_patterns() -> None:
    pinned = set(plan("node --test", NODE_TREE).pinned)
    assert {
        "package.json",
        "test/calc.js",
        "test/helpers/fixture.mjs",
        "lib/sum.test.mjs",
        "lib/sum-test.cjs",
        "lib/sum_test.js",
        "lib/test-sum.js",
        "lib/test.js",
    } <= pinned
    # node runs neither code nor jest's names, nor installed packages' tests
    assert not {"calc.js", "lib/sum.js", "lib/sum.spec.js", "node_modules/dep/test/x.js"} & pinned


def test_node_test_pins_the_files_and_folders_its_command_names() -> None:
    named = plan("node --test test/calc.js lib/sum.js", NODE_TREE)
    # a file on the command runs whatever its name
    assert {"test/calc.js", "lib/sum.js", "package.json"} <= set(named.pinned)
    assert "lib/sum.test.mjs" not in named.pinned  # not on the command: node does not run it
    folder = plan("node --test test/", NODE_TREE)
    assert {"test/calc.js", "test/helpers/fixture.mjs"} <= set(folder.pinned)
    searched = plan("node --test lib", NODE_TREE)
    assert {"lib/sum.test.mjs", "lib/test.js"} <= set(searched.pinned)
    assert "lib/sum.js" not in searched.pinned
    globbed = plan("node --test 'lib/**/*.spec.js'", NODE_TREE)
    assert "lib/sum.spec.js" in globbed.pinned
    assert folder.runners == ("node", "node:test")


def test_node_test_pins_the_modules_it_preloads_but_not_its_flags_values() -> None:
    tree = {*NODE_TREE, "adds"}
    row = "node --import ./setup.mjs --test --test-name-pattern adds test/"
    pinned = set(plan(row, tree).pinned)
    assert {"setup.mjs", "test/calc.js"} <= pinned
    assert "adds" not in pinned


def test_node_default_patterns_match_node_22s_globs() -> None:
    for path in ("a.test.js", "a-test.mjs", "a_test.cjs", "test-a.js", "test.js", "x/test/a.js"):
        assert node_test_file("", path), path
    for path in ("a.js", "atest.js", "a.test.json", "tests/a.js", "a.spec.js"):
        assert not node_test_file("", path), path
    assert node_test_file("test", "a.js")  # a searched folder named test: every file
    assert glob_regex("**/*.test.?(c|m)js").fullmatch("a/b/x.test.mjs")
    assert glob_regex("**/test/**/*.js").fullmatch("test/x.js")
    assert not glob_regex("src/*.js").fullmatch("src/a/b.js")


# -- jest, vitest -------------------------------------------------------------------------

JEST_TREE = {
    "package.json",
    "src/calc.js",
    "src/calc.test.js",
    "src/__tests__/more.js",
    "src/__mocks__/fs.js",
    "__mocks__/lodash.js",
    "src/__snapshots__/calc.test.js.snap",
    "spec.ts",
    "checks/extra.js",
    "babel.config.js",
    "tsconfig.json",
    "tsconfig.test.json",
    "src/.babelrc",
    "jest.setup.js",
    "vite.config.ts",
}


def test_jest_pins_its_matches_mocks_snapshots_and_what_transforms_the_tests() -> None:
    pinned = set(plan("npx jest --ci", JEST_TREE).pinned)
    assert {
        "src/calc.test.js",
        "src/__tests__/more.js",
        "spec.ts",
        "__mocks__/lodash.js",  # replaces lodash with no word in the test
        "src/__mocks__/fs.js",
        "src/__snapshots__/calc.test.js.snap",
        "babel.config.js",
        "src/.babelrc",
        "tsconfig.json",
        "tsconfig.test.json",
        "package.json",
    } <= pinned
    assert not {"src/calc.js", "checks/extra.js"} & pinned


def test_jest_reads_main_s_json_configuration_for_its_tests_and_setup_files() -> None:
    package = (
        '{"jest": {"testMatch": ["<rootDir>/checks/**/*.js"],'
        ' "setupFilesAfterEnv": ["<rootDir>/jest.setup.js"]}}'
    )
    pinned = set(plan("jest", JEST_TREE, {"package.json": package}).pinned)
    assert {"checks/extra.js", "jest.setup.js"} <= pinned
    assert "src/calc.js" not in pinned


def test_vitest_pins_its_default_include_under_its_root() -> None:
    tree = {*JEST_TREE, "web/package.json", "web/a.spec.mts", "web/b.js"}
    pinned = set(plan("vitest run --root web --reporter verbose", tree).pinned)
    assert {"web/a.spec.mts", "web/package.json", "vite.config.ts"} <= pinned
    assert "web/b.js" not in pinned
    assert plan("npx vitest run", tree).runners == ("node", "vitest")


# -- package scripts ------------------------------------------------------------------------


def test_npm_test_follows_main_s_script_to_node_s_runner() -> None:
    texts = {"package.json": '{"scripts": {"test": "node --test", "pretest": "node lint.js"}}'}
    found = plan("npm test", {*NODE_TREE, "lint.js"}, texts)
    assert {"test/calc.js", "lib/sum.test.mjs", "lint.js", "package.json", ".npmrc"} <= {
        *found.pinned,
        ".npmrc",
    }
    assert "node:test" in found.runners and "npm" in found.runners


def test_each_package_manager_runs_the_named_script_with_its_arguments() -> None:
    texts = {
        "web/package.json": '{"scripts": {"unit": "node --test", "test": "jest --ci"}}',
    }
    tree = {"web/package.json", "web/test/a.js", "web/test/b.js", "web/x.test.js", "web/.npmrc"}
    one = plan("cd web && npm run unit -- test/a.js", tree, texts)
    assert {"web/test/a.js", "web/.npmrc", "web/package.json"} <= set(one.pinned)
    assert "web/x.test.js" not in one.pinned  # node runs only the file it was given
    for row in ("yarn --cwd web test", "pnpm -C web test", "npm --prefix web t"):
        assert "jest" in plan(row, tree, texts).runners, row
    assert "jest" in plan("cd web && yarn jest", tree, texts).runners  # a package's program
    assert plan("npm install", tree, texts).pinned == []


def test_a_script_main_lacks_runs_nothing_and_a_branch_script_is_not_read() -> None:
    tree = {"package.json", "test/calc.js"}
    branch = {*tree, "test/other.js"}
    found = plan("npm test", tree, {"package.json": "{}"}, branch)
    assert "node:test" not in found.runners and found.pinned == ["package.json"]


# -- go -------------------------------------------------------------------------------------

GO_TREE = {
    "go.mod",
    "calc.go",
    "calc_test.go",
    "a/a.go",
    "a/a_test.go",
    "a/deep/d_test.go",
    "a/testdata/in.txt",
    "b/b_test.go",
    "tools/go.mod",
    "tools/t_test.go",
    "go.work",
}
GO_TEXTS = {
    "go.mod": "module example.com/m\n\ngo 1.19\n",
    "tools/go.mod": "module example.com/tools\n",
    "go.work": "go 1.19\n\nuse (\n\t.\n\t./tools\n)\n",
}


def test_go_import_paths_name_the_module_s_folders() -> None:
    one = set(plan("go test example.com/m/a", GO_TREE, GO_TEXTS).pinned)
    assert {"a/a_test.go", "a/testdata/in.txt", "go.mod"} <= one
    assert not {"a/deep/d_test.go", "b/b_test.go", "calc_test.go"} & one
    tree = set(plan("go test -v example.com/m/...", GO_TREE, GO_TEXTS).pinned)
    assert {"calc_test.go", "a/a_test.go", "a/deep/d_test.go", "b/b_test.go"} <= tree
    worked = set(plan("go test example.com/tools", GO_TREE, GO_TEXTS).pinned)
    assert "tools/t_test.go" in worked and "tools/go.mod" in worked
    assert "a/a_test.go" not in set(plan("go test fmt", GO_TREE, GO_TEXTS).pinned)


def test_go_reads_go_mod_and_go_work_in_the_folders_above() -> None:
    pinned = set(plan("cd a && go test .", GO_TREE, GO_TEXTS).pinned)
    assert {"go.mod", "go.work", "a/a_test.go"} <= pinned
    assert "a/deep/d_test.go" not in pinned


# -- cargo ----------------------------------------------------------------------------------

CARGO_TREE = {
    "Cargo.toml",
    "src/lib.rs",
    "tests/root.rs",
    "crates/foo/Cargo.toml",
    "crates/foo/src/lib.rs",
    "crates/foo/tests/it.rs",
    "crates/foo/checks/extra.rs",
    "crates/bar/Cargo.toml",
    "crates/bar/tests/b.rs",
    "crates/old/Cargo.toml",
    "crates/old/tests/o.rs",
    ".cargo/config.toml",
}
CARGO_TEXTS = {
    "Cargo.toml": '[workspace]\nmembers = ["crates/*"]\nexclude = ["crates/old"]\n'
    '[package]\nname = "root"\n',
    "crates/foo/Cargo.toml": '[package]\nname = "foo"\n\n[[test]]\nname = "extra"\n'
    'path = "checks/extra.rs"\n',
    "crates/bar/Cargo.toml": '[package]\nname = "bar"\n',
}
MEMBER_TESTS = {
    "crates/foo/tests/it.rs",
    "crates/foo/Cargo.toml",
    "crates/foo/checks/extra.rs",
    "crates/bar/tests/b.rs",
    "crates/bar/Cargo.toml",
}


def test_cargo_pins_every_workspace_member_s_tests_however_the_row_picks() -> None:
    for row in (
        "cargo test",
        "cargo test --workspace",
        "cargo test -p foo",
        "cargo test --manifest-path crates/foo/Cargo.toml",
        "cd crates/foo && cargo test",
        "cargo +stable test --all",
    ):
        pinned = set(plan(row, CARGO_TREE, CARGO_TEXTS).pinned)
        assert MEMBER_TESTS | {"Cargo.toml", ".cargo/config.toml"} <= pinned, row
        assert not {"crates/old/tests/o.rs", "crates/foo/src/lib.rs"} & pinned, row


def test_cargo_without_a_workspace_pins_its_own_package() -> None:
    texts = {"crates/bar/Cargo.toml": '[package]\nname = "bar"\n'}
    pinned = set(plan("cargo test --manifest-path crates/bar/Cargo.toml", CARGO_TREE, texts).pinned)
    assert {"crates/bar/tests/b.rs", "crates/bar/Cargo.toml"} <= pinned
    assert "crates/foo/tests/it.rs" not in pinned


# -- make -----------------------------------------------------------------------------------


def test_make_reads_the_files_its_makefile_includes() -> None:
    texts = {
        "Makefile": "include mk/common.mk\n-include local.mk\n",
        "mk/common.mk": "PY = python3\ncheck:\n\t$(PY) -m pytest -q tests/unit\n",
    }
    tree = {"Makefile", "mk/common.mk", "tests/unit/test_a.py", "tests/other/test_b.py"}
    found = plan("make check", tree, texts, branch={*tree, "local.mk"})
    assert {"Makefile", "mk/common.mk", "tests/unit/test_a.py"} <= set(found.pinned)
    assert "local.mk" in found.remove  # the branch's own -include'd file is taken out
    assert "tests/other/test_b.py" not in found.pinned
    assert found.runners == ("make", "pytest")
