"""The real aider (installed by ``.ci/install``) as a ``cli`` desk through its shipped
profile. aider sends no ``tools``: it edits files from the model's reply and asks again on
its own when its test command fails, so its calls are conversation turns (``toolless_turns``)
and a repaid one is noticed. Its test prints a new temporary path on every run (masked by
the profile in the test report aider sends back); it is SIGKILLed while the second call is
held inside the upstream, and the resumed run sends upstream again only that request."""

from __future__ import annotations

import json

import pytest

from assay.agentcli.profiles import PROFILES
from assay.gateway.calls import matching_body
from assay.gateway.wire import digest
from tests.desks.cli_scene import (
    KEY,
    add_desk,
    assert_resumed_cleanly,
    killed_and_resumed,
    model_intents,
    use_cli,
)
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake, toolless_side

FAILING = (
    "import tempfile\nimport unittest\n\n\nclass T(unittest.TestCase):\n"
    "    def test_a(self):\n        self.fail(tempfile.mkdtemp())\n"
)
PASSING = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n"


def whole(path: str, content: str) -> str:
    """A reply in aider's ``whole`` edit format: the file's path, then all of it."""
    return f"Writing {path}.\n\n{path}\n```\n{content}```\n"


SCRIPT = [{"content": whole("test_one.py", FAILING)}, {"content": whole("test_one.py", PASSING)}]
COMMAND = ["aider", "--auto-test", "--test-cmd=python3 -m unittest test_one", "--message={prompt}"]


@pytest.mark.slow
def test_aider_killed_in_a_call_resumes_repaying_only_that_request(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_cli(monkeypatch, "aider")
    world.add_briefs(brief_text("aid", body="Make the test pass."))
    held = 1  # the call aider makes on its own with the failing test's report
    with WireFake(SCRIPT, by="replies", is_side=toolless_side) as fake:
        add_desk(world, fake, "aider", [], cli={"command": COMMAND})
        scene = killed_and_resumed(world, fake, "aider", "aid", held=held)
    assert_resumed_cleanly(scene, len(SCRIPT))
    assert not model_intents(scene, turn=False)  # no call of aider's is a side request
    conversation = [s for s in scene.requests if s.turn is not None]
    assert all("tools" not in s.body for s in conversation)
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in conversation)
    first, again = (s.body for s in conversation if s.turn == held)
    report = first["messages"][-1]["content"]
    assert report.startswith("I ran this command:") and "FAILED" in report
    # The relaunched aider ran the test again: a new temporary path, masked in the matching
    assert json.dumps(first) != json.dumps(again)
    aider = PROFILES["aider"]
    keys = {
        digest("/r", matching_body(aider.api, b, extra=aider.normalise)) for b in (first, again)
    }
    assert len(keys) == 1
    bare = {digest("/r", matching_body(aider.api, b)) for b in (first, again)}
    assert len(bare) == 2  # without the profile's masks, the resume would have diverged
    assert world.show("assay/aid:test_one.py") == PASSING
    shown = world.assay("history", "--brief", "aid", "--forge", world.url)
    assert "repeated" in shown.stdout, shown.stdout  # the repaid request is on the timeline
