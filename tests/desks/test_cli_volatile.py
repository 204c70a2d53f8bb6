"""A real CLI whose tools print something new on every run (``date +%s%N``, unittest's run
time, Codex's session id for a command past its yield), SIGKILLed with a call in flight and
restarted under its own ``--holder``: the relaunched CLI runs its tools again, the volatile
parts of their output are masked in the matching, and the resume diverges nowhere and sends
upstream again only the request that was in flight. Without the desk's pattern for the
timestamp the same resume diverges (exit 5), naming the tool result.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.desks.test_cli_real import add_desk, cli_env
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake

__all__ = ["cli_env"]  # the fixture, used by name

NANOS = r"\b\d{19}\b"  # what `date +%s%N` prints
TWO_TESTS = (
    "printf 'import unittest\\nclass T(unittest.TestCase):\\n"
    "    def test_a(self): pass\\n    def test_b(self): pass\\n' > test_two.py"
)
COMMANDS = [
    TWO_TESTS,
    "date +%s%N",
    "python3 -m unittest test_two 2>&1",
    "echo stamp >> log.txt",
    "date +%s%N > now.txt; cat now.txt",  # the answer to this one is held, then SIGKILL
]


def _script(profile: str) -> list[dict[str, Any]]:
    if profile == "claude-code":
        calls = [
            {"name": "Bash", "arguments": {"command": c, "description": "x"}} for c in COMMANDS
        ]
    else:
        calls = [{"name": "exec_command", "arguments": {"cmd": c}} for c in COMMANDS]
        # a command still running past its yield: Codex answers with a new session id each run
        calls.insert(
            4, {"name": "exec_command", "arguments": {"cmd": "sleep 1", "yield_time_ms": 250}}
        )
    return [{"tool_calls": [c]} for c in calls] + [{"content": "Done."}]


CASES = {"claude-code": ["Bash"], "codex": ["exec_command"]}


def _outputs(profile: str, body: dict[str, Any]) -> list[str]:
    """The text of each tool result in a request, in order."""
    if profile == "claude-code":
        return [
            str(block.get("content"))
            for message in body["messages"]
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]
    return [str(i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]


def _killed_and_restarted(world: World, fake: WireFake, profile: str, held: int) -> tuple[int, str]:
    fake.hold(at_turn=held)
    first = world.start_desk(profile, "--holder", "box", "--once", "--brief", "drift")
    try:
        fake.wait_for_in_flight(1, timeout=120)
    finally:
        world.kill(first)
        fake.release()
    again = world.desk(profile, "--holder", "box", "--once", "--brief", "drift")
    return again.returncode, again.stdout + again.stderr


@pytest.mark.slow
@pytest.mark.parametrize("profile", sorted(CASES))
def test_volatile_tool_output_resumes_without_diverging(
    world: World, cli_env: None, profile: str
) -> None:
    world.add_briefs(brief_text("drift", body="Run the commands."))
    script = _script(profile)
    held = len(script) - 1  # the last tool's result goes upstream in the held request
    with WireFake(script) as fake:
        cli = {"profile": profile, "volatile_output": [NANOS]}
        add_desk(world, fake, profile, CASES[profile], cli=cli)
        code, out = _killed_and_restarted(world, fake, profile, held)
        assert code == 0, out
        requests = fake.turn_requests()
    turns = [t.turn for t in requests]
    # every call once, and the one in flight at the kill once more
    assert turns == [*range(len(script)), held], turns
    # the relaunched CLI ran its tools again: the two sends of that request differ where
    # the tools' output did, and nowhere else
    before, after = (_outputs(profile, r.body) for r in requests[-2:])
    assert "Ran 2 tests in" in before[2] and "OK" in before[2]
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert {1, len(before) - 1} <= set(changed), (before, after)
    if profile == "codex":
        assert "Process running with session ID" in before[4] and 4 in changed
    entries = world.journal("drift").entries
    assert not [e for e in entries if e["kind"] == "diverged"]
    assert world.show("assay/drift:log.txt") == "stamp\n"  # the tree as one run leaves it


@pytest.mark.slow
def test_without_the_pattern_the_same_resume_diverges(world: World, cli_env: None) -> None:
    world.add_briefs(brief_text("drift", body="Run the commands."))
    script = _script("claude-code")
    with WireFake(script) as fake:
        add_desk(world, fake, "claude-code", CASES["claude-code"])
        code, out = _killed_and_restarted(world, fake, "claude-code", len(script) - 1)
        paid = fake.answered
    assert code == 5, out
    assert "first difference: messages[4].content[0].content" in out, out
    assert paid == len(script)  # the first run's turns; nothing after the divergence
