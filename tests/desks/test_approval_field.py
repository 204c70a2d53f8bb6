"""``approval: true`` on a brief or on a desk manifest: ``finish`` waits for an approval.

The label ``approval`` already asked for it; the field says the same in the front matter
(or once for every brief a desk runs). The runs are real desk loops on an embedded forge;
the approval is an event on the forge's events ref.
"""

from __future__ import annotations

from typing import Any

import pytest

from assay.briefs import parse_brief, render_brief
from assay.desks.manifests.manifest import parse_manifest
from assay.desks.records.events import EventLog
from assay.errors import BadInput
from assay.forge import open_forge
from tests.desks.world import World, brief_text, finish, write


def approve(world: World, brief: str) -> None:
    with open_forge(world.url, cache_dir=world.root / "approver") as forge:
        EventLog(forge, brief).append("approve", actor="maintainer")


def test_a_brief_with_approval_true_waits_then_finishes_once_approved(world: World) -> None:
    world.add_briefs(brief_text("b1", approval=True), brief_text("b2"))
    world.add_desk("coder", [write("a.txt", "a"), finish("ready")])
    [waiting] = world.run_here("coder", only="b1")
    assert (waiting.code, waiting.waiting_for) == (75, "approval")
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.waiting_for) == ("waiting", "approval")
    # The same desk finishes a brief without the field at once.
    [plain] = world.run_here("coder", only="b2")
    assert (plain.code, plain.waiting_for) == (0, None)
    approve(world, "b1")
    [done] = world.run_here("coder", only="b1")
    assert (done.brief, done.code, done.review) == ("b1", 0, "ready")


def test_a_desk_with_approval_true_makes_every_brief_wait(world: World) -> None:
    world.add_briefs(brief_text("b1"))
    world.add_desk("careful", [finish("ready")], approval=True)
    [waiting] = world.run_here("careful")
    assert (waiting.code, waiting.waiting_for) == (75, "approval")
    approve(world, "b1")
    [done] = world.run_here("careful")
    assert (done.code, done.review) == (0, "ready")


def test_the_field_is_a_boolean_named_in_errors() -> None:
    brief = parse_brief("---\nid: b\ntitle: B\napproval: true\n---\nx\n", source="briefs/b.md")
    assert brief.approval is True
    assert parse_brief(render_brief(brief), source="briefs/b.md").approval is True
    with pytest.raises(BadInput, match=r"briefs/b\.md line 4: approval"):
        parse_brief("---\nid: b\ntitle: B\napproval: please\n---\n", source="briefs/b.md")
    text = "name: d\nkind: command\ncommand: [make, check]\napproval: true\n"
    assert parse_manifest(text, source="desks/d.yaml").approval is True
    assert (
        parse_manifest(text.replace("approval: true\n", ""), source="desks/d.yaml").approval
        is False
    )
    with pytest.raises(BadInput, match=r"desks/d\.yaml line 4: approval"):
        parse_manifest(text.replace("true\n", "maybe\n"), source="desks/d.yaml")


def _command_desk(world: World) -> None:
    (world.desks / "count.py").write_text(
        "from pathlib import Path\n"
        "p = Path('runs.txt')\n"
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x')\n",
        encoding="utf-8",
    )
    (world.desks / "cmd.yaml").write_text(
        "name: cmd\nkind: command\ntakes: {globs: ['*']}\n"
        f"command: [python3, {world.desks / 'count.py'}]\n",
        encoding="utf-8",
    )


def _python_desk(world: World) -> None:
    (world.desks / "pydesk.py").write_text(
        "from pathlib import Path\n"
        "def work(run, brief):\n"
        "    run.step('write', lambda: Path('hello.txt').write_text('hi') and None)\n"
        "    return {'status': 'done', 'summary': 'wrote hello.txt', 'evidence': []}\n",
        encoding="utf-8",
    )
    (world.desks / "py.yaml").write_text(
        "name: py\nkind: python\nentry: pydesk:work\ntakes: {globs: ['*']}\n", encoding="utf-8"
    )


@pytest.mark.parametrize(("desk", "make"), [("cmd", _command_desk), ("py", _python_desk)])
def test_command_and_python_desks_wait_for_approval_like_the_others(
    world: World, desk: str, make: Any
) -> None:
    world.add_briefs(brief_text("b1", approval=True))
    make(world)
    [waiting] = world.run_here(desk)
    assert (waiting.code, waiting.waiting_for) == (75, "approval")
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.waiting_for) == ("waiting", "approval")
    approve(world, "b1")
    [done] = world.run_here(desk)
    assert (done.code, done.review) == (0, "ready")
    if desk == "cmd":  # the work ran once: the resume answered it from the journal
        assert world.show("assay/b1:runs.txt") == "x"


def test_a_rejected_command_desk_fails_its_brief(world: World) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]))
    _command_desk(world)
    [waiting] = world.run_here("cmd")
    assert waiting.waiting_for == "approval"
    world.event("b1", "reject", text="not this way")
    [done] = world.run_here("cmd")
    assert done.code == 1, done
    review = world.review("b1")
    assert review is not None and "rejected: not this way" in review.body
