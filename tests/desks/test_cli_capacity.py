"""A model upstream that still answers 429, 503 or 529 after its retries parks a ``cli``
run as a durable wait (exit 75, ``waiting_for: model capacity``, no process held) instead
of giving the brief back (69). Once the wait has passed, the next desk run resumes it: the
calls before replay, the refused one goes upstream again; a second refusal waits twice as
long. (Any other failure that outlasts the retries is still ``Unavailable``, 69:
tests/gateway/test_gateway.py and tests/desks/test_cli_watch.py.)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from tests.desks.cli_helpers import SCRIPT, add_cli_desk, processes_in
from tests.desks.world import World, brief_text, wait_until
from tests.fakes.wire import Seen, WireFake


class FullAfterOne(WireFake):
    """Answers the first turn, then refuses the next ``refusals`` requests with ``status``."""

    def __init__(self, status: int | str, refusals: int) -> None:
        super().__init__(SCRIPT)
        self.status, self.refusals = status, refusals

    def on_answer(self, seen: Seen) -> None:
        if seen.turn == 0 and self.refusals:
            self.inject(self.status, times=self.refusals)
            self.refusals = 0


def _desk(world: World, fake: WireFake) -> None:
    add_cli_desk(world, fake)
    path = world.desks / "cli.yaml"
    manifest: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    manifest["model"]["capacity_wait_s"] = 0.4
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")


def _waits(world: World, brief: str) -> list[dict[str, Any]]:
    return [e for e in world.journal(brief).entries if e["kind"] == "wait"]


def _seconds(wait: dict[str, Any]) -> float:
    until = datetime.fromisoformat(wait["until"])
    return (until - datetime.fromisoformat(wait["t"].replace("Z", "+00:00"))).total_seconds()


def _due(wait: dict[str, Any]) -> bool:
    return datetime.now(UTC) >= datetime.fromisoformat(wait["until"])


@pytest.mark.slow
def test_no_capacity_parks_the_run_and_a_wake_resumes_it_with_backoff(
    world: World, upstream_key: None
) -> None:
    world.add_briefs(brief_text("full"))
    with FullAfterOne(529, refusals=4) as fake:  # two attempts a run: two runs refused
        _desk(world, fake)
        first = world.desk("cli", "--once", "--json")
        assert first.returncode == 75, first.stdout + first.stderr
        assert '"waiting_for": "model capacity"' in first.stdout
        claim = world.claim("full")
        assert claim is not None and (claim.state, claim.waiting_for) == (
            "waiting",
            "model capacity",
        )
        assert not processes_in(world.root / "machine-a" / "work" / "cli" / "full")
        (wait,) = _waits(world, "full")
        assert wait["for"] == "model capacity"
        assert 0.2 < _seconds(wait) <= 0.4

        wait_until(lambda: _due(wait), what="the first capacity wait to pass")
        second = world.desk("cli", "--once")
        assert second.returncode == 75, second.stdout + second.stderr
        waits = _waits(world, "full")
        assert len(waits) == 2 and 0.6 < _seconds(waits[1]) <= 0.8  # twice as long

        wait_until(lambda: _due(waits[1]), what="the second capacity wait to pass")
        done = world.desk("cli", "--once")
        assert done.returncode == 0, done.stdout + done.stderr
        assert fake.answered == 3  # each turn answered once: the first one replayed twice
        assert fake.failures_sent == 4
    claim = world.claim("full")
    assert claim is not None and claim.state == "done"
    assert "hello.txt" in world.tree("full")
    kinds = [e["kind"] for e in world.journal("full").entries]
    assert kinds.count("wake") == 2 and "error" not in kinds
