"""A client's share of a forge's push budget: one host's recent pushes to one repository.

GitHub counts pushes per repository (it recommends at most 6 a minute) and Assay cannot
read its count, so every process on a host that pushes to one repository writes each push
it sends into one ledger file under the forge's state folder, and asks it first:

- a push is let through when the pushes under way plus those that ended in the last
  window are fewer than the budget; else it waits (a log line says how long) until the
  oldest of them leaves the window. A push is counted from the moment it is let through
  until it ends, and as landed when it ends, so whatever instant the forge counts it at,
  no window the forge sees holds more of this host's pushes than the budget;
- a push the forge refused over its rate (:class:`~assay.plumbing.PushThrottled`: another
  host pushed too, or this one lost its ledger) moved nothing: it is dropped from the
  ledger, every pusher on the host backs off until the forge's ``Retry-After`` (else one
  budget's share of the window), and the same request is sent again. The request is the
  same compare-and-swap, so a retried push that lost a race is still a lost race;
- a push still marked under way by a process that is gone counts as landed when it
  started; the forge refuses what that gets wrong, and the back-off above covers it.

The window is the embedded forge's setting (``assay.forge.budget.window_from_env``:
``ASSAY_FORGE_BUDGET_WINDOW_SECONDS``, else 60 s), so a test that shortens it shortens the
forge's minute and this ledger's alike. One push waits at most ``max_wait_s`` in all;
past it, ``ForgeUnavailable`` (69) and nothing was pushed. A client with a wait cap of its
own for the whole command (GitHub's REST client) passes ``charge``, which each wait is
counted against first and which raises past that cap.

The same ledger, in a file of its own, is the gate's merge budget (``Forge.merge_gate``:
GitHub recommends at most one merged pull request a minute per repository): each merge push
is one entry, and a merge push that moved nothing (a lost race) gives its place back
(``counts``), so its retry from the new main does not wait a window.

The file is JSON (``{"v": 1, "pushes": [...], "until": t}``) written whole under a lock
file (``fcntl.flock``: threads and processes alike); one that cannot be read is started
afresh, which costs at most one throttled push.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from assay.errors import ForgeUnavailable
from assay.plumbing import PushThrottled

T = TypeVar("T")
LOG = logging.getLogger("assay.forge.pushledger")
FORMAT_VERSION = 1
POLL_S = 0.05  # how often a push waiting only on pushes under way looks again
HISTORY = 10_000  # landing times kept in LedgerStats.landed


@dataclass
class LedgerStats:
    """What one ledger's pushes did in this process (for tests, benchmarks, ``--json``)."""

    pushes: int = 0  # requests sent
    waits: int = 0  # pushes that waited for room
    throttled: int = 0  # requests the forge refused over its rate (each sent again)
    waited_s: float = 0.0
    # When each push ended (clock time), the last HISTORY of them.
    landed: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine is alive (one another user owns counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PushLedger:
    """At most ``limit`` pushes from this host to one repository in any ``window`` seconds."""

    def __init__(
        self,
        path: Path,
        *,
        limit: int,
        window: float,
        name: str,
        max_wait_s: float,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        noun: str = "push",
        charge: Callable[[float], None] | None = None,
    ) -> None:
        self.path = path
        self.noun = noun  # what it counts, for log lines and errors: "push" or "merge"
        self.nouns = "pushes" if noun == "push" else f"{noun}s"
        self.limit = limit
        self.window = window
        self.name = name  # the forge, for log lines and errors
        self.max_wait_s = max_wait_s
        self.clock = clock
        self.sleep = sleep
        self.charge = charge
        self.stats = LedgerStats()

    def __call__(self, send: Callable[[], T], *, counts: Callable[[T], bool] | None = None) -> T:
        """Send one push request (``send()``) within the budget: wait for room, send, and
        send again after each refusal over the forge's rate (the ``PushGate`` of
        :mod:`assay.forge.base`). ``counts(answer)`` False: the request moved nothing the
        budget counts, and its place is given back."""
        started = time.monotonic()
        while True:
            ticket = self._admit(started)
            self.stats.pushes += 1
            try:
                answer = send()
            except PushThrottled as exc:
                self.stats.throttled += 1
                backoff = exc.retry_after or self.window / max(self.limit, 1)
                self._drop(ticket, backoff)
                LOG.warning(
                    "push budget: %s refused a push over its rate; every push from this "
                    "host waits %.1f s, then it is sent again",
                    self.name,
                    backoff,
                )
                continue
            except BaseException:
                self._land(ticket)  # it may have reached the forge: it counts
                raise
            if counts is not None and not counts(answer):
                self._drop(ticket, 0.0)
                return answer
            self._land(ticket)
            return answer

    # ------------------------------------------------------------------ the ledger

    def _admit(self, started: float) -> str:
        ticket = uuid.uuid4().hex
        logged = False
        while True:
            with self._locked() as data:
                now = self.clock()
                backing_off = float(data.get("until") or 0) > now
                wait = self._delay(data, now)
                if wait == 0:
                    data["pushes"].append({"id": ticket, "at": now, "pid": os.getpid()})
                    return ticket
            waited = time.monotonic() - started
            if waited + wait > self.max_wait_s:
                raise ForgeUnavailable(
                    f"{self.noun} to {self.name}: the {self.noun} budget ({self.limit} "
                    f"{self.nouns} in {self.window:g} s) had no room for "
                    f"{self.max_wait_s:g} s; nothing was pushed"
                )
            if not logged and wait > POLL_S:
                logged = True
                self.stats.waits += 1
                LOG.warning(
                    "%s budget: %s; waiting %.1f s",
                    self.noun,
                    f"backing off after a refused push to {self.name}"
                    if backing_off
                    else f"{self.limit} {self.nouns} in {self.window:g} s to {self.name}",
                    wait,
                )
            if self.charge is not None:
                self.charge(wait)
            self.sleep(wait)
            self.stats.waited_s += wait

    def _delay(self, data: dict[str, Any], now: float) -> float:
        """0 when a push may go now, else the seconds until the ledger may have room."""
        until = float(data.get("until") or 0)
        if until > now:
            return until - now
        kept, landed, under_way = [], [], 0
        for push in data["pushes"]:
            at = float(push["at"])
            if "pid" in push and not pid_alive(int(push["pid"])):
                push.pop("pid")  # its process is gone: taken to have landed when it started
            if "pid" in push:
                under_way += 1
            elif at > now - self.window:
                landed.append(at)
            else:
                continue
            kept.append(push)
        data["pushes"] = kept
        if under_way + len(landed) < self.limit:
            return 0
        if not landed:
            return POLL_S
        return max(min(landed) + self.window - now, 1e-3)

    def _land(self, ticket: str) -> None:
        with self._locked() as data:
            now = self.clock()
            for push in data["pushes"]:
                if push.get("id") == ticket:
                    push["at"] = now
                    push.pop("pid", None)
            self.stats.landed.append(now)

    def _drop(self, ticket: str, backoff: float) -> None:
        with self._locked() as data:
            data["pushes"] = [p for p in data["pushes"] if p.get("id") != ticket]
            data["until"] = max(float(data.get("until") or 0), self.clock() + backoff)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = self._read()
                yield data
                temp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
                temp.write_text(json.dumps(data), encoding="utf-8")
                os.replace(temp, self.path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            pushes = data["pushes"]
            if data.get("v") != FORMAT_VERSION or not isinstance(pushes, list):
                raise ValueError("not a push ledger")
            for push in pushes:
                float(push["at"])
                int(push.get("pid", 0))
            return {"v": FORMAT_VERSION, "pushes": pushes, "until": float(data.get("until", 0))}
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError) as exc:
            LOG.warning("push budget: %s is unreadable (%s); starting it afresh", self.path, exc)
        return {"v": FORMAT_VERSION, "pushes": [], "until": 0.0}
