"""The journal: an append-only, hash-chained, fsynced record of every step of a run.

``JournalWriter`` appends; ``read_journal`` verifies and reads; ``summarize`` condenses.
The line format is in ``assay.journal.format`` and documented in ``docs/journal.md``.
"""

from __future__ import annotations

from assay.journal.blobs import BlobStore
from assay.journal.format import FORMAT_VERSION, KINDS, STEP_KINDS
from assay.journal.reader import Journal, JournalVersionError, TornLine, read_journal
from assay.journal.redact import Redactor, secrets_from_env
from assay.journal.summary import JournalSummary, step_label, summarize
from assay.journal.writer import DEFAULT_SEGMENT_BYTES, JournalWriter, load_packed

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "FORMAT_VERSION",
    "KINDS",
    "STEP_KINDS",
    "BlobStore",
    "Journal",
    "JournalSummary",
    "JournalVersionError",
    "JournalWriter",
    "Redactor",
    "TornLine",
    "load_packed",
    "read_journal",
    "secrets_from_env",
    "step_label",
    "summarize",
]
