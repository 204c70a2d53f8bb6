"""The evidence gate: environment fingerprints, the row runner, evidence records, the merge rule.

Nothing merges on an agent's own account: ``verify`` re-runs a brief's acceptance rows on
the review's head commit and records what happened; ``merge`` lets a head into main only
when every row is verified passing there, in the declared environment; ``merge_batch`` lets
several in with one push to main (docs/evidence.md).
"""

from __future__ import annotations

from assay.evidence.batch import BatchEntry, BatchOutcome, BatchResult, merge_batch
from assay.evidence.claimed import Claimed, ClaimedRow, claimed_from_entries, journal_anchors
from assay.evidence.fingerprint import (
    declaration_problems,
    diff_fingerprints,
    fingerprint,
    fingerprint_digest,
)
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
