"""A desk restarted with its own ``--holder`` after a SIGKILL takes its brief back at once.

The holder token's local lock (``assay.desks.host.holders``) is the proof: the kernel
drops it when the process dies, so a new process that gets it knows the claim still held
under the token is a dead process's. A live process under the same token is refused.
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.desks.world import World, brief_text, wait_until

# Blocks until the test lets it go (a file beside the manifest), then writes its work.
WORK = """import pathlib, signal, sys
go = pathlib.Path(sys.argv[1])
if not go.exists():
    signal.pause()
pathlib.Path("done.txt").write_text("done")
"""


def _desk(world: World) -> None:
    (world.desks / "work.py").write_text(WORK, encoding="utf-8")
    (world.desks / "cmd.yaml").write_text(
        "name: cmd\nkind: command\ntakes: {globs: ['*']}\nlease: 300\n"
        f"command: [python3, {world.desks / 'work.py'}, {world.desks / 'go'}]\n",
        encoding="utf-8",
    )


def _held(world: World, brief: str = "b1") -> bool:
    claim = world.claim(brief)
    return claim is not None and claim.state == "held"


@pytest.mark.slow
def test_a_killed_desk_restarted_with_its_holder_takes_the_brief_back_at_once(
    world: World,
) -> None:
    world.add_briefs(brief_text("b1"))
    _desk(world)
    first = world.start_desk("cmd", "--holder", "box", "--once")
    wait_until(lambda: _held(world), what="the first desk's claim")
    world.kill(first)
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.holder, claim.fence) == ("held", "box", 1)

    (world.desks / "go").write_text("", encoding="utf-8")
    # Another token still waits out the 300 s lease: nothing to take (exit 3).
    other = world.desk("cmd", "--holder", "elsewhere", "--once", "--json")
    assert other.returncode == 3, other.stdout + other.stderr
    # The same token on the same machine: its lock is free, so its process is dead.
    again = world.desk("cmd", "--holder", "box", "--once", "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.fence) == ("done", 2)
    assert world.show("assay/b1:done.txt") == "done"
    takeovers = [e for e in world.journal("b1").entries if e["kind"] == "takeover"]
    assert len(takeovers) == 1


def test_a_live_desk_under_the_same_holder_is_refused(world: World) -> None:
    world.add_briefs(brief_text("b1"), brief_text("b2"))
    _desk(world)
    first = world.start_desk("cmd", "--holder", "box", "--once")
    try:
        taken = wait_until(
            lambda: next((b for b in ("b1", "b2") if _held(world, b)), None),
            what="the first desk's claim",
        )
        second = world.desk("cmd", "--holder", "box", "--once")
        assert second.returncode == 3, second.stdout + second.stderr
        assert "holder 'box' is in use by a running desk process" in second.stderr
        assert str(first.pid) in second.stderr
        assert world.claim({"b1": "b2", "b2": "b1"}[taken]) is None  # it claimed nothing

        # Another holder finds nothing to take, and is told who holds the brief, until
        # when, and the command that gives it back.
        other = world.desk("cmd", "--holder", "elsewhere", "--once", "--brief", taken)
        assert other.returncode == 3, other.stdout + other.stderr
        note = " ".join(other.stderr.split())
        claim = world.claim(taken)
        assert claim is not None
        assert f"brief {taken} is held by desk cmd (holder 'box', fence 1) until " in note
        assert re.search(r"until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(lease 300 s", note), note
        assert "restarted with --holder box on its machine takes the brief back at once" in note
        release = note.split("release the claim: ", 1)[1]
        argv = shlex.split(release)
        assert argv[:6] == ["assay", "claim", "release", taken, "--holder", "box"], argv
        released = world.assay(*argv[1:])
        assert released.returncode == 0, released.stdout + released.stderr
        claim = world.claim(taken)
        assert claim is not None and claim.state == "released"
    finally:
        world.kill(first)
