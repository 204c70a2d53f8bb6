"""A declared tool refusing its arguments is the runtime's ``denied`` entry (DESIGN §6).

The agent tools (``ToolBox``) refuse a path outside the work tree and a command off the
allowlist with ``Denied``; ``run.tool`` records that refusal, with the arguments and the
reason, at the step's position, for every desk kind alike. The journal is read back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.desks.kinds.tools import ToolBox, ToolPolicy
from assay.errors import Denied
from assay.journal import read_journal
from assay.runtime import Replayer, Run, execute


def toolbox(tree: Path) -> ToolBox:
    tree.mkdir(exist_ok=True)
    policy = ToolPolicy(
        allowed=frozenset({"write_file", "run", "finish"}), run_prefixes=(("echo",),)
    )
    return ToolBox(tree, policy)


def desk(run: Run, _: Any) -> Any:
    run.tool("write_file", {"path": "a.txt", "content": "a"})
    run.tool("run", {"command": "rm -rf ."})
    return "unreachable"


def test_a_command_off_the_allowlist_is_a_denied_entry_read_back(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    tools = toolbox(tmp_path / "tree")
    with pytest.raises(Denied, match="not allowed"):
        execute(desk, None, journal_dir=journal, tools=tools)
    entries = read_journal(journal).entries
    denied = [e for e in entries if e["kind"] == "denied"]
    assert len(denied) == 1
    (entry,) = denied
    assert (entry["step"], entry["name"], entry["pos"]) == ("tool", "run", 2)
    assert entry["args"] == {"command": "rm -rf ."}
    assert "is not allowed" in entry["reason"] and "echo" in entry["reason"]
    # The intent at that position was recorded, and no result: the command never ran.
    at_two = [e for e in entries if e.get("pos") == 2 and e["kind"] == "step"]
    assert [e["status"] for e in at_two] == ["started"]
    assert (tmp_path / "tree" / "a.txt").read_text() == "a"

    # A replay meets the refusal at the same position, with the recorded reason.
    with pytest.raises(Denied, match="is not allowed"):
        Replayer(desk, tools=tools).replay(journal)
    # Running again asks the tool again (it may have been widened) but writes no second entry.
    with pytest.raises(Denied):
        execute(desk, None, journal_dir=journal, tools=tools)
    again = read_journal(journal).entries
    assert [e for e in again if e["kind"] == "denied"] == denied


def test_a_path_outside_the_tree_is_a_denied_entry(tmp_path: Path) -> None:
    def escape(run: Run, _: Any) -> Any:
        return run.tool("write_file", {"path": "../outside.txt", "content": "x"})

    with pytest.raises(Denied, match="leaves the work tree"):
        execute(escape, None, journal_dir=tmp_path / "j", tools=toolbox(tmp_path / "tree"))
    (entry,) = [e for e in read_journal(tmp_path / "j").entries if e["kind"] == "denied"]
    assert entry["args"]["path"] == "../outside.txt" and "leaves the work tree" in entry["reason"]
    assert not (tmp_path / "outside.txt").exists()


def test_a_command_desk_kind_gets_the_entry_too(tmp_path: Path) -> None:
    """Not only agents: any desk function calling ``run.tool`` is recorded the same way."""

    def python_desk(run: Run, _: Any) -> Any:
        return run.tool("run", {"command": "curl http://example.invalid"})

    with pytest.raises(Denied):
        execute(python_desk, None, journal_dir=tmp_path / "j", tools=toolbox(tmp_path / "t"))
    kinds = [e["kind"] for e in read_journal(tmp_path / "j").entries]
    assert kinds[-1] == "denied"
