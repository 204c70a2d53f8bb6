"""``assay merge --ready`` SIGKILLed at each instant of its one push: main never holds half
a batch, and no run ref is lost.

The batch is one atomic push of main (a squash commit per brief), each brief's run ref, its
review marked merged and its branch pinned. The push is held inside the forge's
``receive-pack`` at each of git's stages (nothing moved; every ref locked; every ref moved),
the merge process is killed there, and the forge must show none of the batch or all of it.
A batch run again afterwards merges what was not merged, and never squashes a brief twice.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AssayRunner, popen_assay
from tests.evidence.batchkit import Fleet, review
from tests.evidence.gatekit import git
from tests.torture.held_push import STAGES, HeldPush, read_ref

BRIEFS = ["k1", "k2", "k3"]


@pytest.fixture(scope="module")
def gate_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    state = tmp_path_factory.mktemp("gate-state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ASSAY_GATE_STATE", str(state))
        yield state


@pytest.fixture(scope="module")
def fleet(gate_state: Path, tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    made = Fleet(tmp_path_factory.mktemp("fleet"), BRIEFS)
    made.verify_all()
    return made


def _state(forge: Path) -> dict[str, object]:
    return {
        "main": read_ref(forge, "refs/heads/main"),
        "runs": [read_ref(forge, f"refs/assay/runs/{name}/1") for name in BRIEFS],
        "reviews": [review(forge, name)["state"] for name in BRIEFS],
    }


@pytest.mark.slow
@pytest.mark.parametrize("stage", STAGES)
def test_a_batch_killed_inside_its_push_leaves_all_or_nothing(
    fleet: Fleet, tmp_path: Path, run_assay: AssayRunner, gate_state: Path, stage: str
) -> None:
    forge = fleet.copy_to(tmp_path / "forge.git")
    env = {"ASSAY_GATE_STATE": str(gate_state), "ASSAY_STATE": str(tmp_path / "state")}
    before = _state(forge)
    assert before["runs"] == [None] * 3 and before["reviews"] == ["ready"] * 3

    held = HeldPush.install(forge, stage=stage, match="refs/heads/main", unless=None)
    held.arm()
    merging = popen_assay(["merge", "--ready", "--forge", str(forge)], cwd=tmp_path, env=env)
    try:
        moving = held.wait_held()
    finally:
        os.killpg(merging.pid, signal.SIGKILL)
        merging.communicate(timeout=60)
        held.release()
    # One push carries main, every run ref and every review.
    runs = {f"refs/assay/runs/{name}/1" for name in BRIEFS}
    assert {"refs/heads/main", *runs} | {f"refs/assay/reviews/{n}" for n in BRIEFS} <= set(
        moving.refs
    )
    after = _state(forge)
    if stage == "post-receive":  # every ref had moved when the merge died
        assert after["main"] == moving.refs["refs/heads/main"][1] != before["main"]
        assert after["runs"] == [fleet.heads[name] for name in BRIEFS]
        assert after["reviews"] == ["merged"] * 3
    else:
        assert after == before

    (forge / "hooks" / stage).unlink()
    again = run_assay("merge", "--ready", "--forge", str(forge), "--json", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(again.stdout)
    expected = [] if stage == "post-receive" else ["squashed"] * 3
    assert [entry["outcome"] for entry in report["briefs"]] == expected
    final = _state(forge)
    assert final["runs"] == [fleet.heads[name] for name in BRIEFS]
    assert final["reviews"] == ["merged"] * 3
    # One commit per brief, whichever attempt made them.
    gd = ["--git-dir", str(forge)]
    assert git(*gd, "rev-list", "--count", f"{before['main']}..main") == "3"
