"""``normalise`` drops exactly what changes between two runs of one conversation: each real
CLI runs the same script twice in the same work tree and HOME, and at every position the
normalised requests are equal while (for Claude Code and Codex) the raw ones are not."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from assay.agentcli.profiles import PROFILES, CliProfile
from assay.gateway.calls import matching_body
from tests.agentcli.clis import cli_path, run_launch, work_and_home
from tests.agentcli.test_sessions import SCRIPTED, scripted_launch
from tests.fakes.wire import WireFake

CASES = SCRIPTED


def run_twice(profile: str, tmp_path: Path) -> list[list[dict[str, Any]]]:
    binary, _, _, script = CASES[profile]
    runs = []
    for _ in range(2):
        work, home = work_and_home(tmp_path)
        with WireFake(script(work)) as fake:
            launch = scripted_launch(profile, workdir=work, home=home, url=fake.url)
            done = run_launch(launch, workdir=work, home=home, binary=cli_path(binary))
            assert done.returncode == 0, done.stderr + done.stdout
            runs.append([s.body for s in fake.turn_requests()])
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("profile", sorted(CASES))
def test_two_runs_of_one_conversation_normalise_to_the_same_requests(
    profile: str, tmp_path: Path
) -> None:
    first, second = run_twice(profile, tmp_path)
    assert len(first) == len(second) == 6
    for position, (a, b) in enumerate(zip(first, second, strict=True)):
        assert _matched(PROFILES[profile], a) == _matched(PROFILES[profile], b), (
            f"request {position} differs"
        )
    if profile == "gemini-cli":  # its first request holds nothing volatile on one day;
        # every later one, the ids it minted from its clock for the calls before
        assert all(a != b for a, b in zip(first[1:], second[1:], strict=True))
    elif profile != "mini-swe-agent":  # mini-swe-agent sends nothing volatile
        assert all(a != b for a, b in zip(first, second, strict=True))


def _matched(profile: CliProfile, body: dict[str, Any]) -> dict[str, Any]:
    """What the gateway matches a request of ``profile``'s CLI on."""
    return matching_body(profile.api, body, masks=profile.output_masks(), extra=profile.normalise)


def test_normalise_copies_and_tolerates_odd_shapes() -> None:
    body = {
        "metadata": {"user_id": "x"},
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=1.2.3; cch=ab;"},
            {"type": "text", "text": "You are Claude Code."},
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "# currentDate\nToday's date is 2026-12-01."}],
            }
        ],
    }
    before = copy.deepcopy(body)
    got = PROFILES["claude-code"].normalise("anthropic", body)
    assert body == before
    assert got == {
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "# currentDate\nToday's date is <date>."}],
            }
        ],
    }
    odd: dict[str, Any] = {"messages": "text", "input": [3, None, {"content": 5}], "system": "s"}
    for profile in PROFILES.values():
        assert profile.normalise(profile.api, odd) == odd
    codex = {
        "prompt_cache_key": "k",
        "client_metadata": {},
        "input": [
            {
                "type": "function_call_output",
                "id": "fco_1",
                "call_id": "call_1",
                "output": "Chunk ID: 1a2b\nWall time: 0.1 seconds\nOutput:\nok",
            }
        ],
    }
    assert _matched(PROFILES["codex"], codex) == {
        "input": [
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": "Chunk ID: <volatile>\nWall time: <volatile>\nOutput:\nok",
            }
        ]
    }
