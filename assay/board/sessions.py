"""Reading a run's process sessions out of its journal entries: a view of the fold.

A desk holds a process only while it works: from ``start``, ``takeover`` or ``wake`` to the
``wait`` or ``end`` that lets the process go (or to the last entry before a ``takeover``,
when the process died). The board sets the seconds held beside the run's wall-clock age to
show how much of a long-lived run held no compute at all. The rule is
``assay.journal.fold``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from assay.forgestate.rows import Session


def sessions(entries: Iterable[Mapping[str, Any]]) -> tuple[Session, ...]:
    """The process sessions a journal records, in order."""
    from assay.journal.fold import fold

    return fold(entries).sessions
