"""Durability modes: what a desk pushes to its forge at each durability point, and when.

Every durability point is appended and fsynced to the local journal and committed to the
work directory's branch whatever the mode, so a desk killed on the same machine resumes
from its local commits (``BranchSync.checkout``) and pays no call twice. The mode decides
which of those commits are also CAS-pushed (docs/desks.md, "Durability"):

- ``step``: every durability point (a tool step rides with the next point, or after 5 s);
- ``window``: at most once per ``checkpoint_window``, and always at a stop (a wait, an
  approval, a paused budget, the end, the flush after the run), before the objective's
  judge reads the forge, and after an irreversible step (an effect, the ``finish`` tool);
  a background thread pushes a commit left unpushed for a whole window, and every local
  commit rides in any push the host's group makes before that (``assay.forge.group``);
- ``exit``: only at a stop.

A desk's ``durability:`` wins; without one, the forge's ``default_durability`` applies:
``step`` on the embedded forge (any ``Forge``), ``window`` on GitHub (``github:``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from assay.errors import AssayError, Fenced

LOG = logging.getLogger("assay.desks.host.durability")

Mode = Literal["step", "window", "exit"]
MODES: tuple[Mode, ...] = ("step", "window", "exit")
# Points where the run stops or the forge is read next: every mode pushes there.
STOPS = frozenset({"wait", "budget", "end", "objective.judge"})
AFTER_RUN = "after run"  # Session.flush's reason prefix: the last point of a process
IRREVERSIBLE = frozenset({"effect"})  # window mode pushes after these (and ``finish``)
FINISH_TOOL = "finish"
DEFAULT_WINDOW_S = 30.0


@dataclass(frozen=True)
class Durability:
    """A desk's durability mode and, for ``window``, its window in seconds."""

    mode: Mode = "step"
    window_s: float = DEFAULT_WINDOW_S

    @classmethod
    def for_desk(cls, desk: Any, forge: Any) -> Durability:
        """The desk manifest's mode, else the forge's default (see the module docstring)."""
        mode = getattr(desk, "durability", None) or getattr(forge, "default_durability", "step")
        if mode not in MODES:
            mode = "step"
        window = float(getattr(desk, "checkpoint_window", DEFAULT_WINDOW_S) or DEFAULT_WINDOW_S)
        return cls(mode=cast(Mode, mode), window_s=window)

    @property
    def rides(self) -> bool:
        """Whether a checkpoint not yet due rides in whatever push the host makes next
        (window mode: it costs no push and shortens what a lost machine repays)."""
        return self.mode == "window"

    def to_json(self) -> dict[str, Any]:
        """What the run's start entry records (``durability``)."""
        if self.mode == "window":
            return {"mode": self.mode, "window_s": self.window_s}
        return {"mode": self.mode}

    def pushes(self, reason: str, *, since_push_s: float, last_step: str = "") -> bool:
        """Whether the durability point ``reason`` is pushed (else only committed locally).

        ``since_push_s``: seconds since this holder's last push; ``last_step``: the name of
        the step the point follows (``finish`` for the finish tool)."""
        if reason in STOPS or reason.startswith(AFTER_RUN) or self.mode == "step":
            return True
        if self.mode == "exit":
            return False
        if reason in IRREVERSIBLE or (reason == "tool" and last_step == FINISH_TOOL):
            return True
        return since_push_s >= self.window_s


class DeskPusher:
    """A desk's background thread: ``tick()`` keeps the desk's group unit current (a lease
    renewal to ride in the host's next push, a checkpoint left a whole window unpushed) and
    pushes it when due; it returns how long to wait before the next tick.

    ``Fenced`` from a tick is reported to ``on_fenced`` and ends the thread; other failures
    are logged and the tick is tried again after ``retry_s``.
    """

    def __init__(
        self,
        *,
        tick: Callable[[], float],
        on_fenced: Callable[[], None],
        retry_s: float,
        name: str,
    ) -> None:
        self.tick = tick
        self.on_fenced = on_fenced
        self.retry_s = retry_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> DeskPusher:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop (waits for a push in flight)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        delay = 0.0
        while not self._stop.wait(delay):
            try:
                delay = self.tick()
            except Fenced as exc:
                LOG.warning("%s", exc.message)
                self.on_fenced()
                return
            except AssayError as exc:
                LOG.warning(
                    "desk push failed (tried again in %.1f s): %s", self.retry_s, exc.message
                )
                delay = self.retry_s
