"""An approval given after the gate judged a head moves the verdict: the gate is dispatched
again, and its new check run lets the brief merge.

The merge rule counts a brief's approval, and on GitHub a merge also needs the gate's own
signed check run to say ``pass``. A brief verified before its approval had a failing check
run that nothing would replace: the gate had been dispatched for that head once. Through the
real CLI against the fake GitHub, each command on a fresh runner (a cold cache).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from assay.github.init import starter_files
from tests.github.test_gate_check import BRIEF, Scene, in_review

APPROVAL_BRIEF = f"""---
id: {BRIEF}
title: Tidy up
approval: true
verify:
  - id: unit
    run: test -e ok
---
Leave a file called ok; a maintainer approves it.
"""


@pytest.fixture
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    # The workflows too: the fake dispatches only a workflow main holds.
    workflows = {path: source.read_text() for path, source in starter_files().items()}
    main = {**workflows, f"briefs/{BRIEF}.md": APPROVAL_BRIEF}
    with in_review(tmp_path_factory.mktemp("answer-regate"), main) as made:
        yield made


def events(scene: Scene, *args: str) -> dict[str, object]:
    done = scene.run("github", "events", *args, "--json", gate=True)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def gate_dispatches(scene: Scene) -> list[dict[str, str]]:
    return [d["inputs"] for d in scene.fake.dispatches if d["workflow"] == "assay-gate.yml"]


@pytest.mark.slow
def test_an_approval_after_the_verdict_dispatches_the_gate_again_and_the_brief_merges(
    scene: Scene,
) -> None:
    verified = scene.verify()
    assert verified["passed"] is True  # every row passes; the approval is what is missing
    assert scene.gate_runs()[-1]["conclusion"] == "failure"
    refused = scene.merge()
    assert refused.returncode == 1 and "approv" in refused.stderr, refused.stderr

    # A stranger's approval is no answer: nothing is dispatched.
    scene.fake.add_comment(scene.pull, "/assay approve", "stranger")
    assert events(scene, "--dispatch-gate", "assay-gate.yml")["gated"] == []
    assert gate_dispatches(scene) == []

    scene.fake.add_comment(scene.pull, "/assay approve ship it", "maintainer")
    report = events(scene, "--dispatch-gate", "assay-gate.yml")
    assert report["gated"] == [BRIEF]
    assert gate_dispatches(scene) == [{"brief": BRIEF, "sha": scene.head}]

    # The dispatched gate judges the same head again, now with the approval: a newer run.
    assert scene.verify()["published"] == ["check+"]
    assert scene.gate_runs()[-1]["conclusion"] == "success"
    merged = scene.merge()
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert scene.fake.pulls[scene.pull]["merged"] is True
