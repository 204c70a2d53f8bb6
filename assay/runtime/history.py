"""The replay index: what the journal recorded at each position the code asks for.

Desk code asks for things in order (a step, a checkpoint, a drain of signals, a wait);
each request is a *position* (``pos``, 1-based). The index is the journal's fold
(``assay.journal.fold``), which honours fork-on-divergence: a ``diverged`` entry at
position p archives everything recorded at p and later, so new entries from p on are what
replay sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from assay.journal.fold import POSITIONAL, Recorded, RunFacts, Totals, fold, label_of

__all__ = ["POSITIONAL", "History", "Recorded", "Totals", "label_of"]


@dataclass
class History(RunFacts):
    """Positions -> recorded entries, the event ids already consumed, usage totals and
    the blobs already listed by some line: everything a resume needs, in one pass."""

    @classmethod
    def build(cls, entries: Iterable[Mapping[str, Any]]) -> History:
        return cls(**vars(fold(entries)))
