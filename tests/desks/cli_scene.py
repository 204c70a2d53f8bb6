"""One scene for a real agent CLI as a ``cli`` desk (``assay desk run``) against the scripted
upstream, the pattern each CLI's own test file follows: its tools print something new on
every run (``date +%s%N``, unittest's run time), the desk is SIGKILLed while a model call is
held inside the upstream, and a new process under the same ``--holder`` resumes it (the
relaunched CLI runs its tools again; the recorded calls are answered from the journal).

Each new CLI's file (tests/desks/test_cli_<name>.py) gives its script in its own tool names
and asserts the rest: only the request in flight reached the upstream twice, the resume
diverged nowhere, the tree is what one run leaves."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from tests.agentcli.clis import cli_path
from tests.desks.world import World
from tests.fakes.wire import Seen, WireFake

KEY = "sk-real-cli-scene-upstream-key-2b7d"
NANOS = r"\b\d{19}\b"  # what `date +%s%N` prints: the desk's own volatile_output pattern
TWO_TESTS = (
    "printf 'import unittest\\nclass T(unittest.TestCase):\\n"
    "    def test_a(self): pass\\n    def test_b(self): pass\\n' > test_two.py"
)
# What each scene's tools run, in order: the last one's result is in the held request.
COMMANDS = [TWO_TESTS, "date +%s%N", "python3 -m unittest test_two 2>&1", "echo stamp >> log.txt"]


@dataclass
class Scene:
    """What a scene's run left: the upstream's requests and the brief's journal."""

    requests: list[Seen]
    entries: list[dict[str, Any]]
    held: int
    turns: Counter[int] = field(init=False)

    def __post_init__(self) -> None:
        self.turns = Counter(s.turn for s in self.requests if s.turn is not None)


def use_cli(monkeypatch: pytest.MonkeyPatch, binary: str) -> None:
    """The upstream key in the desk's environment and the CLI's folder first on PATH."""
    monkeypatch.setenv("ASSAY_TEST_UPSTREAM_KEY", KEY)
    folder = str(cli_path(binary).parent)
    monkeypatch.setenv("PATH", os.pathsep.join([folder, os.environ["PATH"]]))


def add_desk(world: World, fake: WireFake, profile: str, tools: list[str], **extra: Any) -> None:
    cli = {"profile": profile, "volatile_output": [NANOS], **extra.pop("cli", {})}
    manifest = {
        "name": profile,
        "kind": "cli",
        "takes": {"globs": ["*"]},
        "cli": cli,
        "model": {
            "adapter": "openai",
            "model": "fake-model",
            "base_url": fake.openai_base_url,
            "api_key_env": "ASSAY_TEST_UPSTREAM_KEY",
            "attempts": 2,
        },
        "tools": tools,
        "lease": "3s",
        "sandbox": {"toolchains": ["python", "node"]},
        **extra,
    }
    (world.desks / f"{profile}.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")


def killed_and_resumed(
    world: World, fake: WireFake, profile: str, brief: str, *, held: int
) -> Scene:
    """Run ``profile``'s desk on ``brief``, SIGKILL it while turn ``held`` is inside the
    upstream, then run it again under the same holder to its end."""
    fake.hold(at_turn=held)
    first = world.start_desk(profile, "--holder", "box", "--once", "--brief", brief)
    try:
        fake.wait_for_in_flight(1, timeout=180)
    finally:
        world.kill(first)
        fake.release()  # the held answer goes to a socket nobody reads
    again = world.desk(profile, "--holder", "box", "--once", "--brief", brief)
    assert again.returncode == 0, again.stdout + again.stderr
    return Scene(
        requests=list(fake.seen),
        entries=world.journal(brief).entries,
        held=held,
    )


def assert_resumed_cleanly(scene: Scene, turns: int) -> None:
    """Every scripted turn went upstream once and the held one twice; nothing diverged; the
    journal recorded each conversation call once, as a turn (its intent, which the resumed
    process reused for the call in flight)."""
    assert scene.turns == {**{t: 1 for t in range(turns)}, scene.held: 2}, scene.turns
    assert not [e for e in scene.entries if e["kind"] == "diverged"]
    assert len(model_intents(scene, turn=True)) == turns


def model_intents(scene: Scene, *, turn: bool) -> list[dict[str, Any]]:
    """The journal's model-call intents recorded as turns (or as side requests)."""
    return [
        e
        for e in scene.entries
        if e.get("step") == "model" and e.get("status") == "started" and e.get("turn") is turn
    ]


def tool_results(body: dict[str, Any]) -> list[Any]:
    """The tool results of a chat-completions request (its ``tool`` messages)."""
    return [
        m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool"
    ]
