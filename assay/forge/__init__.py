"""Forges: where shared state lives (DESIGN §4).

``open_forge(spec)`` opens the git layer of any forge; the embedded forge is a bare
repository made by ``init_forge`` and served over smart HTTP by ``ForgeServer``;
``RefLog`` keeps append-only versioned records on a ref (events, evidence, reviews, status).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.forge.base import Forge, default_cache_dir
from assay.forge.embedded import MAIN, init_forge, is_forge
from assay.forge.open import open_forge
from assay.forge.records import BRIEF_LOGS, RECORD_PATH, LogEntry, RefLog
from assay.plumbing import Identity, PushOutcome, PushResult, RefUpdate

if TYPE_CHECKING:
    from assay.forge.serve import ForgeServer

__all__ = [
    "BRIEF_LOGS",
    "MAIN",
    "RECORD_PATH",
    "Forge",
    "ForgeServer",
    "Identity",
    "LogEntry",
    "PushOutcome",
    "PushResult",
    "RefLog",
    "RefUpdate",
    "default_cache_dir",
    "init_forge",
    "is_forge",
    "open_forge",
]


def __getattr__(name: str) -> Any:
    # The HTTP server (and http.server) only when asked for: a desk or waker process that
    # only opens a forge should not pay for it at start-up.
    if name == "ForgeServer":
        from assay.forge.serve import ForgeServer

        return ForgeServer
    raise AttributeError(f"module 'assay.forge' has no attribute {name!r}")
