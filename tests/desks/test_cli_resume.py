"""Each real CLI that resumes natively (Claude Code, Codex, the Gemini CLI, Qwen Code,
OpenCode), SIGKILLed three times in one run and resumed from its own session state by a new
process each time:

- during a tool call (a command blocked on a marker file the test creates after the kill),
- during a streamed answer (the upstream has sent the answer's first event and holds the
  rest),
- between calls (the CLI's next request is checkpointed and held before any answer).

A tool prints something new on every run (``date +%s%N``) and no mask is declared for it:
a relaunched CLI replayed against the journal would diverge there. Every tool appends a
line to ``runs.log``, a file no checkpoint holds (ignored by git: restoring the work tree
never touches it), so a tool that ran twice shows twice. The run must end with: no
divergence, each tool's line once (only the command the first kill cut short started
again), every request sent upstream once but the two in flight at the stream and held
kills, none of them carrying what the CLI added because it resumed, and the work tree of an
uncrashed run of the same script.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.agentcli.profiles import PROFILES
from assay.agentcli.resume import RESUME_PROMPT
from tests.agentcli.clis import cli_path
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake
from tests.forge_fixtures import put_on_main, wait_until

KEY = "sk-resume-upstream-key-61d2"
IGNORED = ["runs.log", "starts.log", "marker"]
STREAMED, HELD = 5, 7  # the turns whose requests are in flight at the second and third kill


def shell(tool: str) -> Callable[[str], dict[str, Any]]:
    key = "cmd" if tool == "exec_command" else "command"
    extra = {"description": "step"} if tool in ("Bash", "bash") else {}
    return lambda command: {"name": tool, "arguments": {key: command, **extra}}


# profile: (binary, the shell tool, the desk's model)
CLIS: dict[str, tuple[str, str, dict[str, str]]] = {
    "claude-code": ("claude", "Bash", {"adapter": "anthropic", "model": "claude-sonnet-4-5"}),
    "codex": ("codex", "exec_command", {"adapter": "openai", "model": "gpt-5-codex"}),
    "gemini-cli": ("gemini", "run_shell_command", {"adapter": "gemini", "model": "gemini-2.5-pro"}),
    "qwen-code": ("qwen", "run_shell_command", {"adapter": "openai", "model": "qwen3-coder"}),
    "opencode": ("opencode", "bash", {"adapter": "openai", "model": "fake-model"}),
}


def commands() -> list[str]:
    def logged(i: int) -> str:
        return f"echo {i} >> inside.txt && echo {i} >> runs.log"

    blocked = "echo started >> starts.log; while [ ! -e marker ]; do sleep 0.05; done; "
    return [
        logged(0),
        "date +%s%N",  # new on every run, and no mask for it
        blocked + logged(2),  # the first kill: while this waits for the marker
        logged(3),
        "date +%s%N && " + logged(4),
        logged(5),  # the second kill: the stream of the answer to this one's request
        logged(6),  # the third: the request carrying this one's result, held
        logged(7),
    ]


def script(profile: str) -> list[dict[str, Any]]:
    call = shell(CLIS[profile][1])
    return [{"tool_calls": [call(c)]} for c in commands()] + [{"content": "All eight ran."}]


def add_desk(world: World, fake: WireFake, profile: str) -> None:
    _, tool, model = CLIS[profile]
    base = fake.openai_base_url if model["adapter"] == "openai" else fake.url
    manifest = {
        "name": profile,
        "kind": "cli",
        "takes": {"globs": ["*"]},
        "cli": {"profile": profile},
        "model": {**model, "base_url": base, "api_key_env": "ASSAY_TEST_UPSTREAM_KEY"},
        "tools": [tool],
        "lease": "3s",
        "sandbox": {"toolchains": ["python", "node"]},
    }
    (world.desks / f"{profile}.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")


@pytest.fixture
def clis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_TEST_UPSTREAM_KEY", KEY)
    bins = [str(cli_path(binary).parent) for binary, _, _ in CLIS.values()]
    monkeypatch.setenv("PATH", os.pathsep.join([*bins, os.environ.get("PATH", "")]))


def worktree(world: World, profile: str, brief: str) -> Path:
    return world.root / "machine-a" / "work" / profile / brief


def killed_three_times(world: World, fake: WireFake, profile: str) -> None:
    """Run the brief ``crash`` and SIGKILL its desk at the three instants (module
    docstring), each restart under the same ``--holder`` (a dead process's: at once)."""
    work = worktree(world, profile, "crash")
    args = ("--holder", "box", "--once", "--brief", "crash")

    first = world.start_desk(profile, *args)
    wait_until(lambda: (work / "starts.log").exists(), timeout=120, what="the blocked tool")
    world.kill(first)
    (work / "marker").write_text("")

    for turn, mid_stream in ((STREAMED, True), (HELD, False)):
        fake.hold(at_turn=turn, mid_stream=mid_stream)
        process = world.start_desk(profile, *args)
        try:
            fake.wait_for_in_flight(1, timeout=120)
        finally:
            world.kill(process)
            fake.release()


def uncrashed(world: World, profile: str) -> None:
    """Run the brief ``clean`` through the same script, never killed."""
    work = worktree(world, profile, "clean")
    process = world.start_desk(profile, "--once", "--brief", "clean")
    wait_until(lambda: (work / "starts.log").exists(), timeout=120, what="the blocked tool")
    (work / "marker").write_text("")
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, out + err


@pytest.mark.slow
@pytest.mark.parametrize("profile", sorted(CLIS))
def test_a_cli_killed_three_times_resumes_its_own_session(
    world: World, clis: None, profile: str
) -> None:
    assert PROFILES[profile].resume_method == "native"
    put_on_main(world.forge_path, {".gitignore": "\n".join(IGNORED) + "\n"})
    world.add_briefs(brief_text("crash", body="Run the steps."))
    world.add_briefs(brief_text("clean", body="Run the steps."))
    with WireFake(script(profile)) as fake:
        add_desk(world, fake, profile)
        killed_three_times(world, fake, profile)
        done = world.desk(profile, "--holder", "box", "--once", "--brief", "crash")
        assert done.returncode == 0, done.stdout + done.stderr
        crashed = list(fake.turn_requests())

        uncrashed(world, profile)

    work = worktree(world, profile, "crash")
    # No tool ran twice: one line each; only the command the first kill cut short started
    # again (its line is written once it gets past the marker).
    assert (work / "runs.log").read_text() == "".join(f"{i}\n" for i in (0, 2, 3, 4, 5, 6, 7))
    assert (work / "starts.log").read_text() == "started\nstarted\n"
    # Upstream: every turn once, and again only the two requests in flight at a kill.
    turns = Counter(seen.turn for seen in crashed)
    assert turns == {**{t: 1 for t in range(len(script(profile)))}, STREAMED: 2, HELD: 2}
    assert not [s for s in crashed if RESUME_PROMPT in str(s.body)]
    entries = world.journal("crash").entries
    assert not [e for e in entries if e["kind"] == "diverged"]
    assert len([e for e in entries if e["kind"] == "takeover" and e["prev_fence"]]) == 3
    # The work tree is the uncrashed run's, file for file.
    assert world.tree("crash") == world.tree("clean")
    assert world.show("assay/crash:inside.txt") == (work / "runs.log").read_text()
