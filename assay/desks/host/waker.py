"""The push-triggered waker of a served embedded forge (``assay desk serve``).

DESIGN §10: on the served embedded forge a push to an events ref triggers the waker at
once, so a waiting desk holds no process and is woken by inbound traffic. The forge server
calls ``Waker.poke()`` after every accepted push; the waker's one thread compares the
events refs and main (a raised budget or ``max_runs``) with what it saw last, straight from
the bare repository (no network), and when they moved runs ``wake`` once. Pokes that come
while a wake runs are coalesced into one more look afterwards.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import assay.refs as refs
from assay.errors import AssayError
from assay.forge.embedded import ref_tips

LOG = logging.getLogger("assay.desks.host.waker")
WATCHED = refs.WATCHED


def watched_refs(forge_path: Path) -> str:
    """The refs whose movement can wake a run, read from the bare repository itself."""
    return "".join(f"{sha} {ref}\n" for ref, sha in ref_tips(forge_path, WATCHED).items())


class Waker:
    """Runs ``wake_once()`` on its own thread whenever the watched refs moved."""

    def __init__(
        self,
        forge_path: Path,
        wake_once: Callable[[], list[Any]],
        *,
        on_report: Callable[[Any], None] = lambda report: None,
    ) -> None:
        self.forge_path = Path(forge_path)
        self.wake_once = wake_once
        self.on_report = on_report
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
        while True:
            self._poked.wait()
            if self._stop.is_set():
                return
            self._poked.clear()
            try:
                refs = watched_refs(self.forge_path)
                if refs == self._seen:
                    continue
                self._seen = refs
                for report in self.wake_once():
                    self.on_report(report)
                self.wakes += 1
            except AssayError as error:  # keep serving; the next push looks again
                LOG.warning("wake failed: %s", error.message)
                self._seen = ""
