"""The push-triggered waker of a served embedded forge (``assay desk serve``).

DESIGN §10: on the served embedded forge a push to an events ref triggers the waker at
once, so a waiting desk holds no process and is woken by inbound traffic. The forge server
calls ``Waker.poke()`` after every accepted push; the waker's one thread compares the
events refs and main (a raised budget or ``max_runs``) with what it saw last, straight from
the bare repository (no network), and when they moved runs ``wake`` once. Pokes that come
while a wake runs are coalesced into one more look afterwards. A timer wait needs no push:
after each look the waker asks ``next_timer`` when the earliest one ends, and runs ``wake``
then too (a ``run.sleep``, a ``cli`` run waiting for model capacity).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import assay.refs as refs
from assay.errors import AssayError
from assay.forge.embedded import ref_tips

LOG = logging.getLogger("assay.desks.host.waker")
WATCHED = refs.WATCHED
OVERDUE_RETRY_S = 30.0


def watched_refs(forge_path: Path) -> str:
    """The refs whose movement can wake a run, read from the bare repository itself."""
    return "".join(f"{sha} {ref}\n" for ref, sha in ref_tips(forge_path, WATCHED).items())


def claim_refs(forge_path: Path) -> str:
    """The claim refs, read the same way: a claim that starts waiting moves its ref."""
    return "".join(f"{sha} {ref}\n" for ref, sha in ref_tips(forge_path, (refs.CLAIMS,)).items())


class Waker:
    """Runs ``wake_once()`` on its own thread whenever the watched refs moved."""

    def __init__(
        self,
        forge_path: Path,
        wake_once: Callable[[], list[Any]],
        *,
        on_report: Callable[[Any], None] = lambda report: None,
        next_timer: Callable[[], datetime | None] = lambda: None,
    ) -> None:
        self.forge_path = Path(forge_path)
        self.wake_once = wake_once
        self.on_report = on_report
        self.next_timer = next_timer
        self.wakes = 0
        self._seen = ""
        self._poked = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="assay-waker", daemon=True)

    def start(self) -> Waker:
        self._poked.set()  # one look at start: events may have arrived while nobody served
        self._thread.start()
        return self

    def poke(self) -> None:
        """Called by the forge server after every accepted push (cheap, never blocks)."""
        self._poked.set()

    def stop(self) -> None:
        self._stop.set()
        self._poked.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        due: float | None = None  # time.monotonic() at which to look for a timer wait
        claims = ""  # the claim refs when the timer was last read: a new wait moves them
        looked = datetime.now(UTC)  # when the last wake began
        while True:
            timeout = None if due is None else max(due - time.monotonic(), 0.0)
            poked = self._poked.wait(timeout)
            if self._stop.is_set():
                return
            self._poked.clear()
            try:
                refs = watched_refs(self.forge_path)
                if poked and refs == self._seen:
                    now_claims = claim_refs(self.forge_path)
                    if now_claims != claims:  # a run may have started waiting on a timer
                        claims = now_claims
                        due = _due(self.next_timer(), looked=looked)
                    continue
                self._seen = refs
                looked = datetime.now(UTC)
                for report in self.wake_once():
                    self.on_report(report)
                self.wakes += 1
                claims = claim_refs(self.forge_path)
                due = _due(self.next_timer(), looked=looked)
            except AssayError as error:  # keep serving; the next push looks again
                LOG.warning("wake failed: %s", error.message)
                self._seen = ""


def _due(moment: datetime | None, *, looked: datetime) -> float | None:
    """When (``time.monotonic()``) to look for the timer wait ending at ``moment``: a
    little past it, so it is due when looked at. A timer that came due since the last wake
    (``looked``) is looked at now; one that was already due then is one whose run that wake
    could not take (its desk is not here, its claim moved): looked at again later, not
    spun on."""
    if moment is None:
        return None
    left = (moment - datetime.now(UTC)).total_seconds()
    if left > 0:
        return time.monotonic() + left + 0.2
    return time.monotonic() + (0.0 if moment > looked else OVERDUE_RETRY_S)
