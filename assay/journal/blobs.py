"""Content-addressed payloads under ``blobs/``: large outputs and every model message.

A blob's name is the hex sha256 of its bytes, so a payload written twice is stored once
and a changed byte is detectable by re-hashing. Blobs are written to a temporary name,
fsynced and renamed, so a reader never sees half a blob.
"""

from __future__ import annotations

import os
from pathlib import Path

from assay.errors import Corrupt
from assay.journal.files import check_directory, read_file
from assay.journal.format import HASH_PREFIX, digest

BLOB_DIR = "blobs"


def blob_path(directory: Path, ref: str) -> Path:
    """Where blob ``ref`` (``"sha256:<hex>"``) lives under a journal directory."""
    return directory / BLOB_DIR / ref.removeprefix(HASH_PREFIX)


def is_ref(value: object) -> bool:
    """Whether ``value`` looks like a blob reference."""
    if not isinstance(value, str) or not value.startswith(HASH_PREFIX):
        return False
    hexpart = value[len(HASH_PREFIX) :]
    return len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart)


class BlobStore:
    """Reads and writes the blobs of one journal directory."""

    def __init__(self, directory: Path, *, fsync: bool = True) -> None:
        self.directory = directory
        self.root = directory / BLOB_DIR
        self.fsync = fsync

    def put(self, data: bytes) -> str:
        """Store ``data`` durably (idempotent) and return its reference."""
        ref = digest(data)
        path = blob_path(self.directory, ref)
        if path.exists():
            return ref
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            if self.fsync:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        return ref

    def get(self, ref: str, *, where: str = "") -> bytes:
        """Return blob ``ref``'s bytes after checking them against the name; else Corrupt."""
        if not is_ref(ref):
            raise Corrupt(f"{where}: {ref!r} is not a blob reference", where=where)
        path = blob_path(self.directory, ref)
        try:
            if not check_directory(self.root, where=where):
                raise FileNotFoundError(path)
            data = read_file(path, where=f"{where}: {BLOB_DIR}/{path.name}")
        except FileNotFoundError:
            raise Corrupt(f"{where}: blob {ref} is missing", where=where, blob=ref) from None
        if digest(data) != ref:
            raise Corrupt(f"{where}: blob {ref} does not match its hash", where=where, blob=ref)
        return data
