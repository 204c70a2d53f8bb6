"""Replaying an agent CLI's run: its recorded model calls against the matching a resume
would use now.

A ``cli`` run has no desk code to replay: the CLI decides its calls. What a resume does is
match each request the relaunched CLI sends against the journal, by the digest of the
request's normalised form (``assay.runtime.wire``): the gateway's normalisation with the
volatile-output masks applied, then the profile's own. A changed profile or a changed
``cli.volatile_output`` can therefore make a recorded call unmatchable, and a resume under
them would diverge where no tool changed. ``replay_cli`` rebuilds each recorded request
exactly as it was sent (its context node, its markers and the rest of the request),
normalises it as the desk would now, and names the first call whose digest is not the
recorded one. It reads the journal only: nothing runs, nothing goes upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assay.errors import Diverged
from assay.gateway.wire import Api, digest
from assay.journal import Journal
from assay.runtime.run import Run
from assay.runtime.wire import WIRE, WireSession

# normal(api, body) -> the request body a call is matched on (``matching_body`` bound to a
# desk's masks and its profile's normalisation).
Normal = Callable[[Api, dict[str, Any]], dict[str, Any]]


@dataclass
class CliReplay:
    """What a replay of a cli run found: ``failure`` is None when every call matches."""

    calls: int = 0  # recorded model calls checked (up to the first that does not match)
    failure: Diverged | None = None

    @property
    def matched(self) -> bool:
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "calls": self.calls,
            "failure": self.failure.to_json() if self.failure else None,
        }


def replay_cli(journal: Journal, *, normal: Normal) -> CliReplay:
    """Check every recorded model call of ``journal`` against ``normal`` (module docstring)."""
    run = Run.for_replay(journal)
    session = WireSession(run, difference=lambda recorded, request: "")
    result = CliReplay()
    for pos in sorted(run.history.positions):
        rec = run.history.positions[pos]
        intent = rec.intent
        if rec.label != WIRE or intent is None:
            continue
        result.calls += 1
        api: Api = intent["api"]
        route = str(intent.get("route", ""))
        now = digest(route, normal(api, session.recorded_body(rec)))
        recorded = str(intent.get("digest", ""))
        if now != recorded:
            result.failure = Diverged(
                f"model call {result.calls} (position {pos}, {route}) would not be matched "
                f"by a resume under the current profile and masks: the journal recorded "
                f"digest {recorded[:19]}, the request normalises to {now[:19]} now; a "
                "resumed CLI would diverge there",
                position=pos,
                call=result.calls,
            )
            break
    return result
