"""The evidence gate: environment fingerprints, the row runner, evidence records, the merge rule.

Nothing merges on an agent's own account: ``verify`` re-runs a brief's acceptance rows on
the review's head commit and records what happened; ``merge`` lets a head into main only
when every row is verified passing there, in the declared environment; ``merge_batch`` lets
several in with one push to main (docs/evidence.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported at once: a submodule named like the function it defines would otherwise stand
# in the package for the function once anything imported it.
from assay.evidence.fingerprint import (
    declaration_problems,
    diff_fingerprints,
    fingerprint,
    fingerprint_digest,
)

if TYPE_CHECKING:
    from assay.evidence.batch import BatchEntry, BatchOutcome, BatchResult, merge_batch
    from assay.evidence.claimed import Claimed, ClaimedRow, claimed_from_entries, journal_anchors
    from assay.evidence.gate import (
        MergeOutcome,
        MergeRefused,
        MergeResult,
        VerifyReport,
        merge,
        merge_decision,
        review_table,
        verify,
    )
    from assay.evidence.records import EvidenceRecord, check_chain, decode, encode, seal
    from assay.evidence.rule import MergeDecision, RowStatus, Verdict, decide
    from assay.evidence.runner import RowRun, row_argv, row_environment, run_row
    from assay.evidence.spec import EnvDecl, RowSpec, env_decl, row_specs
    from assay.evidence.store import EvidenceLog, append_records, evidence_ref, fetch_log
    from assay.evidence.table import render_markdown, render_rich, with_table

# A submodule (the review records, the claimed rows) is imported without the rest: the
# gate, the batch merge and the tables are loaded on first use of their names.
_LAZY: dict[str, str] = {
    "BatchEntry": "assay.evidence.batch",
    "BatchOutcome": "assay.evidence.batch",
    "BatchResult": "assay.evidence.batch",
    "Claimed": "assay.evidence.claimed",
    "ClaimedRow": "assay.evidence.claimed",
    "EnvDecl": "assay.evidence.spec",
    "EvidenceLog": "assay.evidence.store",
    "EvidenceRecord": "assay.evidence.records",
    "MergeDecision": "assay.evidence.rule",
    "MergeOutcome": "assay.evidence.gate",
    "MergeRefused": "assay.evidence.gate",
    "MergeResult": "assay.evidence.gate",
    "RowRun": "assay.evidence.runner",
    "RowSpec": "assay.evidence.spec",
    "RowStatus": "assay.evidence.rule",
    "Verdict": "assay.evidence.rule",
    "VerifyReport": "assay.evidence.gate",
    "append_records": "assay.evidence.store",
    "check_chain": "assay.evidence.records",
    "claimed_from_entries": "assay.evidence.claimed",
    "decide": "assay.evidence.rule",
    "decode": "assay.evidence.records",
    "encode": "assay.evidence.records",
    "env_decl": "assay.evidence.spec",
    "evidence_ref": "assay.evidence.store",
    "fetch_log": "assay.evidence.store",
    "journal_anchors": "assay.evidence.claimed",
    "merge": "assay.evidence.gate",
    "merge_batch": "assay.evidence.batch",
    "merge_decision": "assay.evidence.gate",
    "render_markdown": "assay.evidence.table",
    "render_rich": "assay.evidence.table",
    "review_table": "assay.evidence.gate",
    "row_argv": "assay.evidence.runner",
    "row_environment": "assay.evidence.runner",
    "row_specs": "assay.evidence.spec",
    "run_row": "assay.evidence.runner",
    "seal": "assay.evidence.records",
    "verify": "assay.evidence.gate",
    "with_table": "assay.evidence.table",
}

__all__ = [
    "BatchEntry",
    "BatchOutcome",
    "BatchResult",
    "Claimed",
    "ClaimedRow",
    "EnvDecl",
    "EvidenceLog",
    "EvidenceRecord",
    "MergeDecision",
    "MergeOutcome",
    "MergeRefused",
    "MergeResult",
    "RowRun",
    "RowSpec",
    "RowStatus",
    "Verdict",
    "VerifyReport",
    "append_records",
    "check_chain",
    "claimed_from_entries",
    "decide",
    "declaration_problems",
    "decode",
    "diff_fingerprints",
    "encode",
    "env_decl",
    "evidence_ref",
    "fetch_log",
    "fingerprint",
    "fingerprint_digest",
    "journal_anchors",
    "merge",
    "merge_batch",
    "merge_decision",
    "render_markdown",
    "render_rich",
    "review_table",
    "row_argv",
    "row_environment",
    "row_specs",
    "run_row",
    "seal",
    "verify",
    "with_table",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'assay.evidence' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
