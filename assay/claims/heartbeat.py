"""The heartbeat: a thread that renews a held claim every ``lease / 3`` while a run works,
each renewal a push of its own (for a program holding a claim by itself; a desk's run
renews in its host's group push instead, on the schedule below).

The moment a renewal finds the claim fenced (another holder took it over), the thread
calls ``on_fenced`` once and stops; the caller stops the run there (exit 4) without
writing anything else. A renewal that cannot reach the forge is retried at the next tick
(and reported to ``on_error``); the lease is three ticks long, so one or two missed beats
do not lose the claim.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Self

from assay.claims.store import Claim, ClaimStore
from assay.closing import Closing
from assay.errors import AssayError, Fenced

LOG = logging.getLogger("assay.claims.heartbeat")
# A desk renews through its host's group push (assay.desks.host.session): its renewal rides
# in any push the host makes once a third of the lease has passed since the last one, and
# is pushed on its own only when half of it has, so a desk with nothing else to push costs
# one push per half lease, and a busy host's renewals cost none.
RIDES_AFTER = 1 / 3
DUE_AFTER = 1 / 2


class Heartbeat(Closing):
    """Renew ``claim`` every ``interval_s`` (default ``lease / 3``) on a daemon thread.

    ``journal_head`` (optional) is asked for the journal head hash at each renewal, so
    every renewal anchors the journal outside the desk's reach (DESIGN §6); ``calls``
    (optional) for the local journal's model calls, which the renewal reports. A ``with``
    block starts it and stops it on the way out (``close()`` is ``stop()``).
    """

    def __init__(
        self,
        store: ClaimStore,
        claim: Claim,
        *,
        on_fenced: Callable[[], None],
        interval_s: float | None = None,
        journal_head: Callable[[], str | None] | None = None,
        calls: Callable[[], int | None] | None = None,
        on_error: Callable[[AssayError], None] | None = None,
    ) -> None:
        self.store = store
        self.claim = claim
        self.on_fenced = on_fenced
        self.interval_s = interval_s if interval_s is not None else claim.lease_s / 3
        self.journal_head = journal_head
        self.calls = calls
        self.on_error = on_error
        self.renewals = 0
        self.fenced = False
        self.last_error: AssayError | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name=f"heartbeat-{self.claim.brief}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> Claim:
        """Stop renewing (waits for a renewal in flight) and return the claim as it is now."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None
        return self.claim

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def beat(self) -> None:
        """Renew now, from the calling thread (``run.heartbeat()`` inside a long step)."""
        head = self.journal_head() if self.journal_head else None
        calls = self.calls() if self.calls else None
        self.store.renew(self.claim, journal_head=head, calls=calls)
        self.renewals += 1

    def _loop(self) -> None:
        # Event.wait is the tick: stop() ends the wait at once.
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
                self.last_error = None
            except Fenced as exc:
                LOG.warning("%s", exc.message)
                self.fenced = True
                self._stop.set()
                self.on_fenced()
                return
            except AssayError as exc:
                LOG.warning("heartbeat for %s failed: %s", self.claim.brief, exc.message)
                self.last_error = exc
                if self.on_error is not None:
                    self.on_error(exc)

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> Self:
        return self.start()
