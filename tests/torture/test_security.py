"""Security torture: path traversal and command injection through brief text, tool arguments
and comments are denied; secrets reach no journal, log or commit.

(The crash torture also scans everything its run left behind for its secret; the GitHub
suite checks that commands from actors without write permission are ignored.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.briefs import parse_brief
from assay.desks.kinds.tools import ToolBox, ToolPolicy
from assay.desks.records.events import EventLog
from assay.errors import AssayError, BadInput, Denied
from assay.forge import open_forge
from assay.github.events import parse_command
from assay.ids import check_id
from tests.forge_fixtures import put_on_main
from tests.torture.fleet import Fleet, call
from tests.torture.scan import scan_for_secret

INJECTIONS = [
    "; touch {m}",
    "&& touch {m}",
    "| touch {m}",
    "$(touch {m})",
    "`touch {m}`",
    "\n touch {m}",
    "' ; touch {m} ; '",
]
TRAVERSALS = [
    "../escape.txt",
    "../../escape.txt",
    "a/../../escape.txt",
    "/tmp/escape.txt",
    "~/escape.txt",
    "..\\escape.txt",
    ".git/hooks/post-commit",
    ".assay/journal/x/000001.jsonl",
]


@pytest.fixture
def toolbox(tmp_path: Path) -> ToolBox:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".git").mkdir()
    policy = ToolPolicy(
        allowed=frozenset({"read_file", "write_file", "list_files", "run", "finish"}),
        run_prefixes=(("printenv",), ("python3", "-c")),
        run_timeout_s=10,
    )
    return ToolBox(tree, policy)


@pytest.mark.parametrize("path", TRAVERSALS)
@pytest.mark.parametrize("tool", ["write_file", "read_file", "list_files"])
def test_tool_paths_cannot_leave_the_work_tree(toolbox: ToolBox, tool: str, path: str) -> None:
    outside = toolbox.root.parent
    before = sorted(p.name for p in outside.iterdir())
    args: dict[str, Any] = {"path": path}
    if tool == "write_file":
        args["content"] = "pwned"
    with pytest.raises(Denied):
        toolbox.call(tool, args)
    assert sorted(p.name for p in outside.iterdir()) == before
    assert not Path("/tmp/escape.txt").exists()


def test_a_symlink_out_of_the_tree_is_denied(toolbox: ToolBox, tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("outside")
    (toolbox.root / "link").symlink_to(tmp_path)
    with pytest.raises(Denied):
        toolbox.call("read_file", {"path": "link/outside.txt"})
    with pytest.raises(Denied):
        toolbox.call("write_file", {"path": "link/outside.txt", "content": "x"})
    assert secret.read_text() == "outside"


@pytest.mark.parametrize("injection", INJECTIONS)
def test_commands_run_without_a_shell(toolbox: ToolBox, tmp_path: Path, injection: str) -> None:
    marker = tmp_path / "marker"
    command = "printenv HOME " + injection.format(m=marker)
    try:
        result = toolbox.call("run", {"command": command})
    except (Denied, BadInput):
        pass  # refused outright (an operator off the allowlist, or not one command line)
    else:
        assert result["command"]  # ran as argv: printenv with odd arguments
    assert not marker.exists(), f"{command!r} reached a shell"


def test_a_command_off_the_allowlist_is_denied(toolbox: ToolBox, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    for command in (f"touch {marker}", f"sh -c 'touch {marker}'", f"printenv;touch {marker}"):
        with pytest.raises(Denied):
            toolbox.call("run", {"command": command})
    assert not marker.exists()


@pytest.mark.parametrize("bad_id", ["../etc", "a/../../b", "/abs", "x;rm -rf", "$(id)", "a b"])
def test_brief_ids_that_would_escape_a_path_or_ref_are_bad_input(bad_id: str) -> None:
    with pytest.raises(BadInput):
        check_id(bad_id)
    text = f"---\nid: {json.dumps(bad_id)}\ntitle: t\n---\nbody\n"
    with pytest.raises(BadInput):
        parse_brief(text, source="briefs/evil.md")


@pytest.mark.parametrize("injection", INJECTIONS)
def test_comments_are_text_never_commands(injection: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    parsed = parse_command("/assay steer " + injection.format(m=marker))
    assert parsed is None or parsed[0] == "signal"
    assert parse_command(injection.format(m=marker) + " /assay approve") is None
    assert not marker.exists()


def test_hostile_brief_comment_and_model_reach_no_shell_and_no_path_outside(
    tmp_path: Path,
) -> None:
    """End to end: a brief whose text, a steering comment and the model's tool calls all
    try to escape. The path escape ends the run DENIED (77); nothing outside the tree is
    written, no marker file appears, the secret is nowhere."""
    marker = tmp_path / "marker"
    secret = "securitySecret-5f0e-never-written"
    hostile = " ".join(i.format(m=marker) for i in INJECTIONS)
    fleet = Fleet(tmp_path / "fleet", ["evil"], lease=30, secret=secret)
    fleet.setup()
    answers = [
        call("run", command=f"printenv HOME $(touch {marker}) ; touch {marker}"),
        call("write_file", path="../../escape.txt", content="pwned"),
        call("finish", summary="never reached", evidence=[]),
    ]
    (fleet.desks_dir / "scripts" / "coder.json").write_text(
        json.dumps({"responses": answers}), encoding="utf-8"
    )
    body = yaml.safe_dump({"id": "evil", "title": f"Evil {hostile}"[:200]})
    put_on_main(fleet.forge_path, {"briefs/evil.md": f"---\n{body}---\n{hostile}\n"})
    with open_forge(str(fleet.forge_path), cache_dir=tmp_path / "cache") as forge:
        EventLog(forge, "evil").append("signal", text=hostile, actor="someone")
    fleet.serve()
    try:
        desk = fleet.start_desk(machine="a")
        fleet.wait_all(timeout=120)
        runs = fleet.runs(desk)
        assert [(r["brief"], r["code"]) for r in runs] == [("evil", Denied.code)], (
            desk.log.read_text()
        )
        assert not marker.exists()
        assert not any(p.name == "escape.txt" for p in tmp_path.rglob("escape.txt"))
        result = fleet.inspect()["evil"]
        assert result.claim_state == "done" and result.starts == 1
        assert scan_for_secret(fleet.root, secret) == []
    finally:
        fleet.stop()


def test_secrets_in_the_environment_reach_no_journal_log_or_commit(tmp_path: Path) -> None:
    """The model repeats the secret and asks for it with a tool: redacted and withheld."""
    secret = "envSecret-1b2c3d-redact-me"
    fleet = Fleet(tmp_path / "fleet", ["s1"], lease=30, secret=secret)
    fleet.setup()
    fleet.serve()
    try:
        fleet.start_desk(machine="a")
        fleet.wait_all(timeout=120)
        assert fleet.inspect()["s1"].claim_state == "done"
        script = (fleet.desks_dir / "scripts" / "coder.json").read_text()
        assert secret in script  # the input really carried it
        assert scan_for_secret(fleet.root, secret) == []
        assert secret not in os.environ.get("ASSAY_SECRET_ENV", "")
    finally:
        fleet.stop()


def test_typed_errors_only_for_hostile_ids_in_tool_calls(toolbox: ToolBox) -> None:
    for args in ({"path": 3}, {"path": "\x00"}, {}, {"path": "a" * 5000, "content": "x"}):
        with pytest.raises(AssayError):
            toolbox.call("write_file", args)
