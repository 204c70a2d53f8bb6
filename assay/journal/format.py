"""The journal's line format: the version, the entry kinds, and canonical encoding.

A line is the canonical JSON of an entry (sorted keys, no spaces, ASCII) with one more
field appended last, ``sum``: ``"sha256:<hex>"`` of the line's bytes before that field
(the entry's canonical JSON). ``sum`` makes any edit of a line detectable, the last one
included; ``prev`` (the previous line's ``sum``) chains lines so a removed or reordered
line is detectable too. The reader checks ``sum`` against the raw bytes, so it never has
to re-encode an entry to verify it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

FORMAT_VERSION = 1

KINDS = frozenset(
    {
        "start",
        "step",
        "checkpoint",
        "signal",
        "wait",
        "wake",
        "compensate",
        "takeover",
        "budget",
        "denied",
        "diverged",
        "error",
        "end",
        "continue",
    }
)
STEP_KINDS = frozenset({"model", "tool", "effect", "compute"})

SUM_MARKER = ',"sum":"'
HASH_PREFIX = "sha256:"


def digest(data: bytes) -> str:
    """``"sha256:<hex>"`` of ``data``: the one hash spelling the journal uses."""
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, compact, ASCII only; NaN and infinities refused."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def encode_line(entry: dict[str, Any]) -> tuple[bytes, str]:
    """Return ``(line bytes without newline, sum)`` for an entry that has no ``sum`` yet."""
    body = canonical(entry)
    total = digest(body.encode("ascii"))
    line = body[:-1] + SUM_MARKER + total + '"}'
    return line.encode("ascii"), total


def body_of(line: bytes) -> tuple[bytes, str] | None:
    """Split a raw line into (body bytes the sum covers, recorded sum), or None."""
    at = line.rfind(SUM_MARKER.encode("ascii"))
    if at <= 0 or not line.endswith(b'"}'):
        return None
    recorded = line[at + len(SUM_MARKER) : -2].decode("ascii", errors="replace")
    return line[:at] + b"}", recorded


def segment_name(number: int) -> str:
    """The file name of segment ``number`` (1-based): ``000001.jsonl``."""
    return f"{number:06d}.jsonl"
