"""Assay: durable, claim-safe coordination of AI agent desks through a git forge.

The public API is re-exported here. The errors are imported eagerly (every area needs
them); every other name is imported on first use (PEP 562), so ``import assay`` stays
cheap for the CLI, which the waker starts on every approval.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from assay.errors import (
    AssayError,
    BadInput,
    Busy,
    Corrupt,
    Denied,
    Diverged,
    Failed,
    Fenced,
    ForgeUnavailable,
    Internal,
    Paused,
    SandboxUnavailable,
    Suspended,
    Suspension,
    Unavailable,
    UsageError,
)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, __getattr__ below
    from assay.branch import BranchSync
    from assay.briefs import Brief, load_brief_dir, load_briefs, parse_brief
    from assay.claims import Claim, ClaimRecord, ClaimStore, Heartbeat
    from assay.desks import DeskManifest, ToolBox, load_desks
    from assay.evidence import (
        MergeDecision,
        VerifyReport,
        decide,
        merge,
        merge_decision,
        verify,
    )
    from assay.evidence.fingerprint import fingerprint  # the function, not its module
    from assay.forge import (
        Forge,
        ForgeServer,
        Identity,
        PushOutcome,
        RefLog,
        RefUpdate,
        init_forge,
        open_forge,
    )
    from assay.journal import (
        Journal,
        JournalSummary,
        JournalWriter,
        read_journal,
        secrets_from_env,
        summarize,
    )
    from assay.models import ModelAdapter, ModelReply, build_model
    from assay.runtime import (
        Budget,
        Event,
        LocalEventStore,
        Replayer,
        ReplayResult,
        Run,
        RunHooks,
        RunResult,
        execute,
        execute_run,
        load_target,
    )
    from assay.sandbox import SandboxSpec, run_sandboxed, start_sandboxed

__version__ = "0.1.0"

# public name -> the module that defines it, imported on first access
_LAZY: dict[str, str] = {
    "BranchSync": "assay.branch",
    "Brief": "assay.briefs",
    "Budget": "assay.runtime",
    "Claim": "assay.claims",
    "ClaimRecord": "assay.claims",
    "ClaimStore": "assay.claims",
    "DeskManifest": "assay.desks",
    "Event": "assay.runtime",
    "Forge": "assay.forge",
    "ForgeServer": "assay.forge",
    "Heartbeat": "assay.claims",
    "Identity": "assay.forge",
    "Journal": "assay.journal",
    "JournalSummary": "assay.journal",
    "JournalWriter": "assay.journal",
    "LocalEventStore": "assay.runtime",
    "MergeDecision": "assay.evidence",
    "ModelAdapter": "assay.models",
    "ModelReply": "assay.models",
    "PushOutcome": "assay.forge",
    "RefLog": "assay.forge",
    "RefUpdate": "assay.forge",
    "ReplayResult": "assay.runtime",
    "Replayer": "assay.runtime",
    "Run": "assay.runtime",
    "RunHooks": "assay.runtime",
    "RunResult": "assay.runtime",
    "SandboxSpec": "assay.sandbox",
    "ToolBox": "assay.desks",
    "VerifyReport": "assay.evidence",
    "build_model": "assay.models",
    "decide": "assay.evidence",
    "execute": "assay.runtime",
    "execute_run": "assay.runtime",
    "fingerprint": "assay.evidence",
    "init_forge": "assay.forge",
    "load_brief_dir": "assay.briefs",
    "load_briefs": "assay.briefs",
    "load_desks": "assay.desks",
    "load_target": "assay.runtime",
    "merge": "assay.evidence",
    "merge_batch": "assay.evidence",
    "merge_decision": "assay.evidence",
    "open_forge": "assay.forge",
    "parse_brief": "assay.briefs",
    "read_journal": "assay.journal",
    "run_sandboxed": "assay.sandbox",
    "secrets_from_env": "assay.journal",
    "start_sandboxed": "assay.sandbox",
    "summarize": "assay.journal",
    "verify": "assay.evidence",
}

__all__ = [
    "AssayError",
    "BadInput",
    "BranchSync",
    "Brief",
    "Budget",
    "Busy",
    "Claim",
    "ClaimRecord",
    "ClaimStore",
    "Corrupt",
    "Denied",
    "DeskManifest",
    "Diverged",
    "Event",
    "Failed",
    "Fenced",
    "Forge",
    "ForgeServer",
    "ForgeUnavailable",
    "Heartbeat",
    "Identity",
    "Internal",
    "Journal",
    "JournalSummary",
    "JournalWriter",
    "LocalEventStore",
    "MergeDecision",
    "ModelAdapter",
    "ModelReply",
    "Paused",
    "PushOutcome",
    "RefLog",
    "RefUpdate",
    "ReplayResult",
    "Replayer",
    "Run",
    "RunHooks",
    "RunResult",
    "SandboxSpec",
    "SandboxUnavailable",
    "Suspended",
    "Suspension",
    "ToolBox",
    "Unavailable",
    "UsageError",
    "VerifyReport",
    "__version__",
    "build_model",
    "decide",
    "execute",
    "execute_run",
    "fingerprint",
    "init_forge",
    "load_brief_dir",
    "load_briefs",
    "load_desks",
    "load_target",
    "merge",
    "merge_batch",
    "merge_decision",
    "open_forge",
    "parse_brief",
    "read_journal",
    "run_sandboxed",
    "secrets_from_env",
    "start_sandboxed",
    "summarize",
    "verify",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'assay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
