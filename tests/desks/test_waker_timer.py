"""The served waker looks again when the earliest timer wait ends, with no push, and pushes
that keep arriving meanwhile (a busy forge) do not put that look off."""

from __future__ import annotations

import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from assay.desks.host.waker import Waker
from tests.forge_fixtures import wait_until


def _out(argv: list[str], given: str) -> str:
    return subprocess.run(
        argv, input=given, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_timer_is_looked_at_when_due_however_often_the_forge_is_poked(tmp_path: Path) -> None:
    forge = tmp_path / "forge.git"
    git = ["git", f"--git-dir={forge}"]
    subprocess.run(["git", "init", "-q", "--bare", str(forge)], check=True)
    tree = _out([*git, "mktree"], "")
    commit = _out([*git, "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", tree], "m")
    subprocess.run([*git, "update-ref", "refs/heads/main", commit], check=True)
    wakes: list[datetime] = []
    lock = threading.Lock()
    timers = [datetime.now(UTC) + timedelta(seconds=0.5)]  # one timer, then none

    def wake_once() -> list[Any]:
        with lock:
            wakes.append(datetime.now(UTC))
        return []

    def next_timer() -> datetime | None:
        with lock:
            return timers[0] if len(wakes) == 1 else None

    waker = Waker(forge, wake_once, next_timer=next_timer).start()
    try:
        wait_until(lambda: len(wakes) == 1, what="the look at start")

        def poked_until_woken() -> bool:
            waker.poke()  # a push that moves nothing the waker watches
            return len(wakes) >= 2

        wait_until(poked_until_woken, timeout=10, what="the timer's look")
        assert wakes[1] >= timers[0]  # not before the timer was due
        assert waker.wakes == 2
    finally:
        waker.stop()
