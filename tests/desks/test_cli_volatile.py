"""A real CLI whose tools print something new on every run (``date +%s%N``, unittest's run
time, Codex's session id for a command past its yield), SIGKILLed with a call in flight and
restarted under its own ``--holder``, the desk set to resume by relaunch and replay
(``cli.resume: relaunch``: what a CLI that cannot resume natively always does; natively,
nothing runs again, tests/desks/test_cli_resume.py): the relaunched CLI runs its tools
again, the volatile parts of their output are masked in the matching, and the resume
diverges nowhere and sends upstream again only the request that was in flight. Without the
masks (the desk's pattern for the timestamp, or the profile's own) the two sends of that
request are different requests: the resume would have diverged there. (A divergence's exit
5 and message, end to end: tests/desks/test_cli_desk.py.)
"""

from __future__ import annotations

from typing import Any

import pytest

from assay.agentcli.profiles import PROFILES, CliProfile
from assay.gateway import volatile
from assay.gateway.calls import matching_body
from assay.gateway.volatile import Mask
from assay.gateway.wire import digest
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


def _key(profile: CliProfile, body: dict[str, Any], masks: tuple[Mask, ...]) -> str:
    """The digest the gateway matches ``body`` on, with ``masks`` as the volatile output."""
    normal = matching_body(profile.api, body, masks=masks, extra=profile.normalise)
    return digest("/route", normal)


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
        cli = {"profile": profile, "volatile_output": [NANOS], "resume": "relaunch"}
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
    # The negative, on the CLI's own two sends: without the masks they are two different
    # requests, and the resume would have diverged there (exit 5 with on_divergence: fail).
    profile_ = PROFILES[profile]
    first, again = (r.body for r in requests[-2:])
    for masks, same in [
        (profile_.output_masks([NANOS]), True),
        (profile_.output_masks(), False),  # the desk's pattern for the timestamp left out
        # the profile's own left out: Claude Code's tools print nothing else that varies,
        # Codex's header (chunk id, wall time, session id) does
        (volatile.masks([NANOS], where="w"), profile == "claude-code"),
        ((), False),
    ]:
        keys = {_key(profile_, body, masks) for body in (first, again)}
        assert (len(keys) == 1) is same, masks
    entries = world.journal("drift").entries
    assert not [e for e in entries if e["kind"] == "diverged"]
    assert world.show("assay/drift:log.txt") == "stamp\n"  # the tree as one run leaves it
