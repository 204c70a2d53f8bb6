"""The embedded forge's push budget: at most N pushes that move refs in any sliding window.

GitHub recommends at most 6 pushes a minute per repository and throttles beyond that: a
push over the rate is slowed down, not refused. ``assay forge serve`` models the same. Its
budget is the forge's settings record's ``pushes_per_minute`` (:mod:`assay.forge.settings`;
0 is unlimited, the default). What it counts is each push request that moves at least one
ref (an atomic push of a checkpoint and its claim is one); a push refused before it could
move anything (by the push rule, or stale against the refs as they are) costs nothing and
never waits.

A push asks :meth:`PushBudget.slot` before it is taken. It is let through when the pushes
under way plus those that landed in the last window are fewer than the budget, else it
waits, in the order the pushes arrived, until the oldest landed push leaves the window. A
push is counted from the moment it is let through until it ends, and as landed from the
moment it ends (after its ``post-receive`` hook and the server's ``on_push``), so however
long each takes, no window holds more than the budget of landed pushes, whichever instant
is taken as a push's landing between the two. One that moved nothing gives its place back.

While a push waits the server writes a keep-alive every :data:`KEEPALIVE_S` seconds
(``assay.forge.serve``), so a client's stall timer (``ASSAY_FORGE_STALL_SECONDS``) sees
bytes arrive and a waited push is never taken for a dead one.

The window is 60 s; ``ASSAY_FORGE_BUDGET_WINDOW_SECONDS`` (read by the server when it
starts) sets another, for tests that run a minute's budget in a second or two: the budget
is then N pushes per that window. It is the one window setting of every push budget: a
``github:`` client's ledger (``assay.forge.pushledger``) and the fake GitHub of the tests
read it too.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from assay.errors import BadInput

WINDOW_S = 60.0
WINDOW_ENV = "ASSAY_FORGE_BUDGET_WINDOW_SECONDS"
KEEPALIVE_S = 0.5  # a waiting push's keep-alive period: under any stall timer a client sets
HISTORY = 10_000  # landing times kept for tests and benchmarks (``PushBudget.landed``)


def window_from_env() -> float:
    """The budget's window in seconds: ``$ASSAY_FORGE_BUDGET_WINDOW_SECONDS``, else 60."""
    raw = os.environ.get(WINDOW_ENV, "")
    if not raw.strip():
        return WINDOW_S
    try:
        window = float(raw)
    except ValueError:
        raise BadInput(f"{WINDOW_ENV}={raw!r}: not a number of seconds") from None
    if not 0 < window <= 3600:
        raise BadInput(f"{WINDOW_ENV}={raw!r}: must be over 0 and at most 3600 seconds")
    return window


@dataclass
class Slot:
    """One push's place in the budget: ``moved`` is set when it moved a ref; ``throttled``
    says it waited for its place; ``limit`` is the budget it was let through under (0:
    none)."""

    throttled: bool
    limit: int
    moved: bool = False


class PushBudget:
    """At most ``limit`` pushes landed in any ``window`` seconds (``limit`` 0: no limit)."""

    def __init__(self, limit: int = 0, *, window: float = WINDOW_S) -> None:
        if limit < 0 or not window > 0:
            raise BadInput(f"push budget: {limit} per {window} s is not a budget")
        self.limit = limit
        self.window = window
        # Monotonic times the pushes landed at, newest last: every one since HISTORY ago.
        self.landed: deque[float] = deque(maxlen=HISTORY)
        self._cond = threading.Condition()
        self._recent: deque[float] = deque()  # the landings still inside the window
        self._in_flight = 0
        self._queue: deque[object] = deque()  # the waiting pushes, first come first

    @property
    def waiting(self) -> int:
        """How many pushes wait for their place now."""
        with self._cond:
            return len(self._queue)

    def set_limit(self, limit: int) -> None:
        """A new budget (the settings record changed), for the pushes that wait too."""
        with self._cond:
            self.limit = limit
            self._cond.notify_all()

    @contextmanager
    def slot(self, keepalive: Callable[[], None] = lambda: None) -> Iterator[Slot]:
        """Wait for this push's place (``keepalive()`` every :data:`KEEPALIVE_S` seconds
        meanwhile, called without the budget's lock), then hold it while the push is taken;
        set ``moved`` on the slot when it moved a ref."""
        throttled = self._admit(keepalive)
        slot = Slot(throttled=throttled, limit=self.limit)
        try:
            yield slot
        finally:
            with self._cond:
                self._in_flight -= 1
                if slot.moved:
                    now = time.monotonic()
                    self._recent.append(now)
                    self.landed.append(now)
                self._cond.notify_all()

    def _admit(self, keepalive: Callable[[], None]) -> bool:
        ticket = object()
        throttled = False
        kept = 0.0  # when keepalive() was last called
        with self._cond:
            self._queue.append(ticket)
        try:
            while True:
                with self._cond:
                    delay = self._delay(ticket)
                    if delay == 0:
                        self._queue.remove(ticket)
                        self._in_flight += 1
                        self._cond.notify_all()  # the next in line looks again
                        return throttled
                    if throttled:
                        self._cond.wait(KEEPALIVE_S if delay is None else min(delay, KEEPALIVE_S))
                if not throttled or time.monotonic() - kept >= KEEPALIVE_S:
                    throttled = True
                    keepalive()  # at once when the wait begins, then every KEEPALIVE_S
                    kept = time.monotonic()
        except BaseException:
            with self._cond:
                if ticket in self._queue:
                    self._queue.remove(ticket)
                    self._cond.notify_all()
            raise

    def _delay(self, ticket: object) -> float | None:
        """0 when ``ticket`` may go now; else the seconds until the window next has room
        (None: until a push under way ends, or the one before it in line goes)."""
        if self.limit == 0:
            return 0
        if self._queue[0] is not ticket:
            return None
        now = time.monotonic()
        while self._recent and self._recent[0] <= now - self.window:
            self._recent.popleft()
        if self._in_flight + len(self._recent) < self.limit:
            return 0
        if not self._recent:
            return None
        return max(self._recent[0] + self.window - now, 1e-3)

    def count_in_window(self, times: list[float] | None = None) -> int:
        """The most landings any one window held (of ``times``, else of :attr:`landed`)."""
        stamps = sorted(self.landed if times is None else times)
        most, first = 0, 0
        for last, stamp in enumerate(stamps):
            while stamp - stamps[first] >= self.window:
                first += 1
            most = max(most, last - first + 1)
        return most
