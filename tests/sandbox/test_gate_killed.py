"""A SIGKILLed ``assay verify`` leaves no row running, even one that double-forked."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.conftest import popen_assay
from tests.evidence.gatekit import Scene
from tests.forge_fixtures import files_named, wait_until
from tests.sandbox.probe import lock_is_free

HOLDER = "setsid flock {lock} sh -c 'touch {ready}; exec sleep 600' & wait"

BRIEF = """---
id: calc
title: Add calc.add
verify:
  - id: hangs
    run: {row}
    timeout: 600
---
Add calc.
"""


def test_a_killed_gate_takes_its_double_forked_row_down(tmp_path: Path) -> None:
    # The row can write only its own tree, so its witnesses live there: a lock held by the
    # setsid'd process, and a ready file that finds the gate's clean tree (under TMPDIR).
    row = HOLDER.format(lock="row.lock", ready="row.ready")
    scene = Scene(tmp_path, brief_text=BRIEF.format(row=row))
    head = scene.desk_commit({"calc.py": "def add(a, b):\n    return a + b\n"}, claims={})
    scene.open_review(head)
    work = tmp_path / "gate-work"
    work.mkdir()
    gate = popen_assay(
        ["verify", "calc", "--forge", str(scene.forge), "--json"],
        cwd=tmp_path,
        env={"ASSAY_STATE": str(tmp_path / "state"), "TMPDIR": str(work)},
    )
    try:
        ready = wait_until(lambda: files_named(work, "row.ready"), timeout=120, what="the row")
        lock = ready[0].parent / "row.lock"
        assert not lock_is_free(lock)
        os.kill(gate.pid, signal.SIGKILL)  # the gate alone: bwrap must die with it
        gate.wait(timeout=30)
        wait_until(lambda: lock_is_free(lock), timeout=30, what="the row to die with the gate")
    finally:
        if gate.poll() is None:
            os.killpg(gate.pid, signal.SIGKILL)
        gate.communicate()
