"""Content-addressed payloads under ``blobs/``: large outputs and every model message.

A blob's name is the hex sha256 of its bytes, so a payload written twice is stored once
and a changed byte is detectable by re-hashing. Blobs are written to a temporary name,
fsynced and renamed, so a reader never sees half a blob.

Blobs are fanned out by the first two hex digits of their hash, as git fans out its loose
objects: ``blobs/ab/<the other 62>``. A checkpoint that adds a blob then changes one small
folder and the 256-entry ``blobs/`` listing, not a listing of every blob of the run (each
version of which the forge keeps). Journals written before kept every blob directly in
``blobs/<64 hex>`` (the *flat* layout); the store still reads them, and a journal written
in both layouts (an old run resumed) reads as one.
"""

from __future__ import annotations

import os
from pathlib import Path

from assay.errors import Corrupt
from assay.journal.files import check_directory, read_file
from assay.journal.format import HASH_PREFIX, digest

BLOB_DIR = "blobs"
FANOUT = 2  # hex digits of the folder a blob is kept in


def blob_path(directory: Path, ref: str) -> Path:
    """Where blob ``ref`` (``"sha256:<hex>"``) is written under a journal directory."""
    hexpart = ref.removeprefix(HASH_PREFIX)
    return directory / BLOB_DIR / hexpart[:FANOUT] / hexpart[FANOUT:]


def flat_blob_path(directory: Path, ref: str) -> Path:
    """Where the flat layout of older journals kept blob ``ref``: ``blobs/<hex>``."""
    return directory / BLOB_DIR / ref.removeprefix(HASH_PREFIX)


def is_ref(value: object) -> bool:
    """Whether ``value`` looks like a blob reference."""
    if not isinstance(value, str) or not value.startswith(HASH_PREFIX):
        return False
    hexpart = value[len(HASH_PREFIX) :]
    return len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart)


class BlobStore:
    """Reads and writes the blobs of one journal directory.

    ``flat=True`` writes the flat layout of older journals (for measurements against the
    old layout and for tests of old journals; reading takes either layout regardless).
    """

    def __init__(self, directory: Path, *, fsync: bool = True, flat: bool = False) -> None:
        self.directory = directory
        self.root = directory / BLOB_DIR
        self.fsync = fsync
        self.flat = flat

    def put(self, data: bytes) -> str:
        """Store ``data`` durably (idempotent) and return its reference."""
        ref = digest(data)
        path = (flat_blob_path if self.flat else blob_path)(self.directory, ref)
        if path.exists() or flat_blob_path(self.directory, ref).exists():
            return ref  # a run resumed from an old journal keeps its flat blobs
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            if self.fsync:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        return ref

    def get(self, ref: str, *, where: str = "") -> bytes:
        """Return blob ``ref``'s bytes after checking them against the name; else Corrupt.

        The blob is looked for at its fanned-out path, then at its flat one; a blob found
        anywhere else (another folder) is missing: only its own paths name it.
        """
        if not is_ref(ref):
            raise Corrupt(f"{where}: {ref!r} is not a blob reference", where=where)
        data = self._read(blob_path(self.directory, ref), where=where, nested=True)
        if data is None:
            data = self._read(flat_blob_path(self.directory, ref), where=where, nested=False)
        if data is None:
            raise Corrupt(f"{where}: blob {ref} is missing", where=where, blob=ref)
        if digest(data) != ref:
            raise Corrupt(f"{where}: blob {ref} does not match its hash", where=where, blob=ref)
        return data

    def _read(self, path: Path, *, where: str, nested: bool) -> bytes | None:
        """The regular file at ``path`` (None when absent); ``Corrupt`` when it, its folder
        (``nested``: the fan-out folder) or ``blobs/`` is a symlink or not what it should be."""
        folders = [self.root, path.parent] if nested else [self.root]
        if not all(check_directory(folder, where=where) for folder in folders):
            return None
        try:
            return read_file(path, where=f"{where}: {path.relative_to(self.directory)}")
        except FileNotFoundError:
            return None
