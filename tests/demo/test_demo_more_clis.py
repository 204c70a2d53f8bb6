"""``assay demo --cli`` with the agent CLIs that speak the chat-completions API (installed by
``.ci/install``): Qwen Code and OpenCode finish over Assay's MCP server; mini-swe-agent and
aider have no MCP client and say their finish in words (``assay.agentcli.finish``), which is
how the palindrome desk's forged "tests pass" still reaches the gate. aider writes every file
of a brief in one answer, so its crash lands in that one call.

Qwen Code tells the whole story: the chat-completions API's complete telling, as
test_demo_cli.py has one for each other API. The other three tell the shortest story that
still holds every part of it (``--briefs 4``: the crash, the approval, the forged claim and
one ordinary brief): each is still accepted by ``--cli`` and driven to the end of the story.
(A file of its own beside test_demo_cli.py: each telling takes most of a minute, and the two
files run on two workers.)"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.agentcli.clis import cli_path
from tests.conftest import assay_argv, assay_env
from tests.demo.test_demo import (
    assert_main_is_the_teams,
    assert_the_refused_review_shows_only_code,
    assert_the_story_was_told,
)
from tests.demo.test_demo_cli import run_demo

BINARIES = {"qwen-code": "qwen", "opencode": "opencode", "mini-swe-agent": "mini", "aider": "aider"}
BRIEFS = {"qwen-code": 6, "opencode": 4, "aider": 4, "mini-swe-agent": 4}


@pytest.mark.slow
@pytest.mark.timeout(420)  # past the demo's own deadline (300 s): its report says what hung
@pytest.mark.parametrize("cli", sorted(BINARIES))
def test_a_chat_completions_cli_tells_the_story(tmp_path: Path, cli: str) -> None:
    directory = tmp_path / "run"
    program = cli_path(BINARIES[cli])
    env = assay_env({"PATH": os.pathsep.join([str(program.parent), os.environ["PATH"]])})
    briefs = BRIEFS[cli]
    done = run_demo(directory, "--cli", cli, "--seed", "3", "--briefs", str(briefs), env=env)
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    assert report["problems"] == []
    assert done.returncode == 0
    assert report["cli"] == cli
    assert_the_story_was_told(report, briefs=briefs)
    desk = yaml.safe_load((directory / "desks" / "demo.yaml").read_text(encoding="utf-8"))
    assert desk["kind"] == "cli" and desk["cli"] == {"profile": cli}
    assert ("finish" in desk["tools"]) is (cli in ("qwen-code", "opencode"))
    lines = (directory / "model-calls.jsonl").read_text(encoding="utf-8").splitlines()
    calls = [json.loads(line) for line in lines]
    turns = [c for c in calls if isinstance(c["turn"], int)]
    sides = [c for c in calls if not isinstance(c["turn"], int)]
    assert len(calls) == report["model_calls"]  # the upstream's own log, side requests too
    assert bool(sides) is (cli == "opencode")  # its title requests, one a brief
    assert all(count == 1 for count in Counter((c["brief"], c["turn"]) for c in sides).values())
    requests = (directory / "model-requests.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(requests) == len(turns) + 1  # the call in flight at the kill, sent again
    assert report["repeated_requests"] == 1

    def history(brief: str) -> subprocess.CompletedProcess[str]:
        forge = str(report["forge_path"])
        argv = assay_argv("history", "--brief", brief, "--forge", forge, "--json")
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)

    # main holds the merged code alone (no session state of a CLI that resumes its own)
    assert_main_is_the_teams(report, history)
    assert_the_refused_review_shows_only_code(report)
