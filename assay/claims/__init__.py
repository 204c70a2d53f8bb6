"""Claims: exactly one holder per brief, by compare-and-swap pushes of one ref each.

``ClaimStore`` acquires, renews, releases and marks claims; ``Heartbeat`` renews a held
claim on a thread and reports fencing; ``ClaimRecord`` is the versioned ``claim.json``.
"""

from __future__ import annotations

from assay.claims.heartbeat import Heartbeat
from assay.claims.record import (
    CLAIM_FILE,
    CLAIMS_PREFIX,
    DEFAULT_SKEW_S,
    FORMAT_VERSION,
    STATES,
    ClaimRecord,
    claim_ref,
    parse_record,
    skew_from_env,
)
from assay.claims.store import Claim, ClaimStore, new_holder_token

__all__ = [
    "CLAIMS_PREFIX",
    "CLAIM_FILE",
    "DEFAULT_SKEW_S",
    "FORMAT_VERSION",
    "STATES",
    "Claim",
    "ClaimRecord",
    "ClaimStore",
    "Heartbeat",
    "claim_ref",
    "new_holder_token",
    "parse_record",
    "skew_from_env",
]
