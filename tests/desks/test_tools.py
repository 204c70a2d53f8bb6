"""The agent tools: confined to the work tree, commands only from the allowlist, no shell."""

from __future__ import annotations

import fcntl
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.desks import TOOL_NAMES, ToolBox, ToolError, ToolPolicy
from assay.errors import Denied

PY = Path(sys.executable)


def box(tmp_path: Path, **policy: object) -> ToolBox:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    defaults: dict[str, object] = {
        "allowed": frozenset(TOOL_NAMES),
        "run_prefixes": ((str(PY), "-c"), ("echo",)),
        "run_timeout_s": 30.0,
    }
    defaults.update(policy)
    return ToolBox(tree, ToolPolicy(**defaults))  # type: ignore[arg-type]


def test_write_read_and_list(tmp_path: Path) -> None:
    tools = box(tmp_path)
    assert tools.call("write_file", {"path": "pkg/mod.py", "content": "x = 1\n"}) == {
        "path": "pkg/mod.py",
        "bytes": 6,
    }
    assert (tools.root / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert tools.call("read_file", {"path": "pkg/mod.py"}) == {
        "path": "pkg/mod.py",
        "content": "x = 1\n",
        "truncated": False,
    }
    tools.call("write_file", {"path": "a.txt", "content": "é"})
    (tools.root / ".git").mkdir()
    (tools.root / ".git" / "config").write_text("[credential]")
    listed = tools.call("list_files", {})
    assert listed == {"path": ".", "files": ["a.txt", "pkg/mod.py"], "truncated": False}
    assert tools.call("list_files", {"path": "pkg"})["files"] == ["pkg/mod.py"]


def test_read_is_bounded(tmp_path: Path) -> None:
    tools = box(tmp_path, max_read_bytes=10)
    (tools.root / "big.txt").write_text("0123456789abcdef")
    result = tools.call("read_file", {"path": "big.txt"})
    assert result["content"] == "0123456789" and result["truncated"] is True


@pytest.mark.parametrize(
    "path",
    [
        "../outside",
        "a/../../outside",
        "/etc/passwd",
        "~/x",
        ".git/hooks/pre-commit",
        ".assay/journal/x/000001.jsonl",
        "sub/../.git/config",
    ],
)
def test_paths_out_of_the_tree_or_into_git_are_denied(tmp_path: Path, path: str) -> None:
    tools = box(tmp_path)
    for name, args in (
        ("write_file", {"path": path, "content": "pwned"}),
        ("read_file", {"path": path}),
        ("list_files", {"path": path}),
    ):
        with pytest.raises(Denied) as caught:
            tools.call(name, args)
        assert caught.value.code == 77
    assert not (tmp_path / "outside").exists()


def test_symlink_escapes_are_denied(tmp_path: Path) -> None:
    tools = box(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (tools.root / "link").symlink_to(outside)
    (tools.root / "file-link").symlink_to(outside / "secret.txt")
    (tools.root / "git-link").symlink_to(tools.root / ".git")
    with pytest.raises(Denied, match="symlink"):
        tools.call("read_file", {"path": "link/secret.txt"})
    with pytest.raises(Denied, match="symlink"):
        tools.call("read_file", {"path": "file-link"})
    with pytest.raises(Denied, match="symlink"):
        tools.call("write_file", {"path": "link/new.txt", "content": "x"})
    with pytest.raises(Denied):
        tools.call("write_file", {"path": "git-link/hooks/post-checkout", "content": "x"})
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    # A symlink that stays inside the tree is fine.
    (tools.root / "real").mkdir()
    (tools.root / "inner").symlink_to(tools.root / "real")
    tools.call("write_file", {"path": "inner/ok.txt", "content": "ok"})
    assert (tools.root / "real" / "ok.txt").read_text() == "ok"


def test_undeclared_tool_is_denied(tmp_path: Path) -> None:
    tools = box(tmp_path, allowed=frozenset({"read_file", "finish"}))
    with pytest.raises(Denied, match="'write_file' is not declared"):
        tools.call("write_file", {"path": "a", "content": "b"})
    with pytest.raises(Denied, match="'rm_rf' is not declared"):
        tools.call("rm_rf", {})
    assert [s["function"]["name"] for s in tools.specs()] == ["read_file", "finish"]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {}),
        ("read_file", {"path": 3}),
        ("write_file", {"path": "a"}),
        ("read_file", {"path": "missing.txt"}),
        ("list_files", {"path": "missing"}),
        ("run", {"command": ""}),
        ("run", {"command": "echo 'unclosed"}),
        ("finish", {}),
        ("finish", {"summary": "s", "evidence": [{"row": "u", "result": "maybe"}]}),
        ("finish", {"summary": "s", "evidence": "all good"}),
    ],
)
def test_malformed_arguments_are_tool_errors(
    tmp_path: Path, name: str, args: dict[str, object]
) -> None:
    with pytest.raises(ToolError) as caught:
        box(tmp_path).call(name, args)
    assert caught.value.code == 65


def test_run_executes_an_allowed_command_without_a_shell(tmp_path: Path) -> None:
    tools = box(tmp_path)
    result = tools.call("run", {"command": "echo hello; rm -rf / $(whoami) `id` > out"})
    assert result["exit"] == 0
    # The shell metacharacters arrived as plain arguments: no shell ever saw them.
    assert result["output"] == "hello; rm -rf / $(whoami) `id` > out\n"
    assert not (tools.root / "out").exists()
    assert result["timed_out"] is False and result["truncated"] is False


def test_run_happens_in_the_work_tree_and_reports_the_exit_code(tmp_path: Path) -> None:
    tools = box(tmp_path)
    script = "import os, sys; print(os.getcwd()); sys.exit(3)"
    result = tools.call("run", {"command": f"{PY} -c '{script}'"})
    assert result["exit"] == 3
    assert result["output"].strip() == str(tools.root)


@pytest.mark.parametrize(
    "command",
    ["rm -rf /", "bash -c 'echo hi'", "ech o", "echoo hi", "/bin/echo hi", f"{PY} script.py"],
)
def test_commands_off_the_allowlist_are_denied(tmp_path: Path, command: str) -> None:
    tools = box(tmp_path)
    with pytest.raises(Denied) as caught:
        tools.call("run", {"command": command})
    assert caught.value.code == 77


def test_run_environment_holds_no_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-1")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret-2")
    monkeypatch.setenv("MY_PASSWORD", "secret-3")
    monkeypatch.setenv("PASSED_THROUGH", "visible")
    monkeypatch.setenv("DECLARED_SECRET", "secret-4")
    monkeypatch.setenv("SHOULD_NOT_PASS", "secret-5")
    tools = box(
        tmp_path,
        env=("PASSED_THROUGH", "GITHUB_TOKEN", "DECLARED_SECRET"),
        secrets=("DECLARED_SECRET",),
    )
    script = "import os, json; print(json.dumps(dict(os.environ)))"
    result = tools.call("run", {"command": f"{PY} -c '{script}'"})
    assert "visible" in result["output"]
    for secret in ("sk-secret-1", "ghp-secret-2", "secret-3", "secret-4", "secret-5"):
        assert secret not in result["output"]
    assert "HOME" not in tools.command_env()


def test_run_times_out_and_kills_everything_it_started(tmp_path: Path) -> None:
    tools = box(tmp_path, run_timeout_s=1.0)
    lock = tools.root / "child.lock"
    # The command starts a grandchild in a session of its own that holds a lock and would
    # outlive it; pids inside the sandbox mean nothing outside, so the lock is the witness.
    script = (
        "import subprocess, sys, time;"
        "p = subprocess.Popen(['setsid', 'flock', 'child.lock', 'sh', '-c', "
        "'touch ready; exec sleep 60']);"
        "time.sleep(60)"
    )
    started = time.monotonic()
    result = tools.call("run", {"command": f'{PY} -c "{script}"'})
    assert time.monotonic() - started < 20
    assert result["timed_out"] is True and result["exit"] is None
    assert (tools.root / "ready").exists()
    with open(lock, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError if it lived


def test_run_output_is_bounded_keeping_head_and_tail(tmp_path: Path) -> None:
    tools = box(tmp_path, max_output_bytes=1000)
    script = "print('HEAD'); print('x' * 100000); print('TAIL')"
    result = tools.call("run", {"command": f'{PY} -c "{script}"'})
    assert result["truncated"] is True
    assert result["output"].startswith("HEAD")
    assert result["output"].rstrip().endswith("TAIL")
    assert "bytes of output skipped" in result["output"]
    assert len(result["output"]) < 1200


def test_run_of_a_missing_program_is_a_result_not_a_crash(tmp_path: Path) -> None:
    tools = box(tmp_path, run_prefixes=(("no-such-program-xyz",),))
    result = tools.call("run", {"command": "no-such-program-xyz --help"})
    assert result["exit"] == 127
    assert "no-such-program-xyz: No such file" in result["output"]


def test_finish_returns_summary_and_claimed_rows(tmp_path: Path) -> None:
    result = box(tmp_path).call(
        "finish",
        {"summary": "done", "evidence": [{"row": "unit", "result": "pass", "note": "3 passed"}]},
    )
    assert result == {
        "finished": True,
        "summary": "done",
        "evidence": [{"row": "unit", "result": "pass", "note": "3 passed"}],
    }


def test_specs_are_valid_openai_function_schemas(tmp_path: Path) -> None:
    specs = box(tmp_path).specs()
    assert [s["function"]["name"] for s in specs] == list(TOOL_NAMES)
    for spec in specs:
        assert spec["type"] == "function"
        jsonschema.Draft202012Validator.check_schema(spec["function"]["parameters"])
    run = next(s for s in specs if s["function"]["name"] == "run")
    assert "echo" in run["function"]["description"]
    # The schemas accept what the tools accept.
    finish = next(s for s in specs if s["function"]["name"] == "finish")
    jsonschema.validate(
        {"summary": "s", "evidence": [{"row": "u", "result": "pass"}]},
        finish["function"]["parameters"],
    )


def test_filesystem_errors_are_tool_errors(tmp_path: Path) -> None:
    tools = box(tmp_path)
    tools.call("write_file", {"path": "plain", "content": "x"})
    with pytest.raises(ToolError):
        tools.call("write_file", {"path": "plain/child.txt", "content": "x"})
    (tools.root / "loop").symlink_to(tools.root / "loop")
    with pytest.raises((ToolError, Denied)):
        tools.call("read_file", {"path": "loop"})
    with pytest.raises(ToolError):
        tools.call("write_file", {"path": "x" * 300, "content": "x"})


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["..", ".", "", "a", "b", ".git", ".assay", "/", "~", "link", "c:"]),
            st.text(max_size=6),
        ),
        min_size=1,
        max_size=5,
    ).map("/".join)
)
def test_fuzzed_paths_never_leave_the_tree(tmp_path: Path, path: str) -> None:
    tools = box(tmp_path)
    link = tools.root / "link"
    if not link.is_symlink():
        (tmp_path / "outside").mkdir(exist_ok=True)
        link.symlink_to(tmp_path / "outside")
    try:
        result = tools.call("write_file", {"path": path, "content": "x"})
    except (Denied, ToolError):
        pass
    else:
        written = (tools.root / result["path"]).resolve()
        assert written.is_relative_to(tools.root)
        assert written.parts[len(tools.root.parts)] not in (".git", ".assay")
    assert list((tmp_path / "outside").iterdir()) == []
