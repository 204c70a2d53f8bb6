"""``assay merge`` SIGKILLed at each instant of its push: main never holds half a brief.

The merge is one atomic push of main (the squash commit), the run ref, the review marked
merged and the branch pinned. The push is held inside the forge's ``receive-pack`` at each
of git's stages (nothing moved; every ref locked; every ref moved), the merge process is
killed there, and the forge must show either none of the four or all of them. A merge run
again afterwards finishes what was not done, and never squashes a brief twice.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.conftest import AssayRunner, popen_assay
from tests.evidence.gatekit import BRIEF, Scene, git
from tests.torture.held_push import STAGES, HeldPush, read_ref

GOOD = "def add(a, b):\n    return a + b\n"
RUN = f"refs/assay/runs/{BRIEF}/1"


def _state(scene: Scene) -> dict[str, object]:
    review = json.loads(
        git("--git-dir", str(scene.forge), "show", f"refs/assay/reviews/{BRIEF}:review.json")
    )
    return {
        "main": read_ref(scene.forge, "refs/heads/main"),
        "run": read_ref(scene.forge, RUN),
        "review": review["state"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("stage", STAGES)
def test_a_merge_killed_inside_its_push_leaves_all_or_nothing(
    tmp_path: Path, run_assay: AssayRunner, stage: str
) -> None:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    env = {"ASSAY_STATE": str(tmp_path / "state")}
    verified = run_assay("verify", BRIEF, "--forge", str(scene.forge), env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    before = _state(scene)
    assert before == {"main": scene.main_sha(), "run": None, "review": "ready"}

    held = HeldPush.install(scene.forge, stage=stage, match="refs/heads/main", unless=None)
    held.arm()
    merging = popen_assay(["merge", BRIEF, "--forge", str(scene.forge)], cwd=tmp_path, env=env)
    try:
        moving = held.wait_held()
    finally:
        os.killpg(merging.pid, signal.SIGKILL)
        merging.communicate(timeout=60)
        held.release()
    # The branch's pin (its own value) is in the push; git's transaction may drop it.
    assert {"refs/heads/main", RUN, f"refs/assay/reviews/{BRIEF}"} <= set(moving.refs)
    after = _state(scene)
    if stage == "post-receive":  # every ref had moved when the merge died
        assert after["run"] == head and after["review"] == "merged"
        assert after["main"] == moving.refs["refs/heads/main"][1] != before["main"]
    else:
        assert after == before

    (scene.forge / "hooks" / stage).unlink()
    again = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    outcome = json.loads(again.stdout)["outcome"]
    assert outcome == ("up_to_date" if stage == "post-receive" else "squashed")
    final = _state(scene)
    assert final["run"] == head and final["review"] == "merged"
    # One commit for the brief, whichever attempt made it.
    assert (
        git("--git-dir", str(scene.forge), "rev-list", "--count", f"{before['main']}..main") == "1"
    )
