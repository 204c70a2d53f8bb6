"""Gate key pairs for tests: the same label always gives the same key."""

from __future__ import annotations

import hashlib

from assay.evidence.keys import GateKey


def key_for(label: str) -> GateKey:
    """A gate private key derived from ``label`` (a test's stand-in for a key file)."""
    return GateKey(hashlib.sha256(label.encode()).digest(), where=f"test key {label!r}")
