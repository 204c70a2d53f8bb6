"""Assay: durable, claim-safe coordination of AI agent desks through a git forge."""

from __future__ import annotations

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
    Suspended,
    Suspension,
    Unavailable,
    UsageError,
)

__version__ = "0.1.0"

__all__ = [
    "AssayError",
    "BadInput",
    "Busy",
    "Corrupt",
    "Denied",
    "Diverged",
    "Failed",
    "Fenced",
    "ForgeUnavailable",
    "Internal",
    "Paused",
    "Suspended",
    "Suspension",
    "Unavailable",
    "UsageError",
    "__version__",
]
