"""Content-addressed payloads under ``blobs/``: large outputs and every model message.

A blob's name is the hex sha256 of its bytes, so a payload written twice is stored once
and a changed byte is detectable by re-hashing. Blobs are written to a temporary name,
fsynced and renamed, so a reader never sees half a blob.

Blobs are fanned out by the first two hex digits of their hash, one digit a folder:
``blobs/a/b/<the other 62>``. A checkpoint that adds a blob changes one small folder and
two listings of at most 16 entries (``blobs/`` and ``blobs/a/``), not a listing of every
blob of the run, and not one of 256 folders either: each version of a listing the forge
keeps, so what a checkpoint writes must not grow with the run (docs/benchmarks.md,
"Journal growth on a forge"). Journals written before are read as they are: the
one-level fan-out ``blobs/ab/<62 hex>`` (``Layout.BYTE``) and, older still, every blob
directly in ``blobs/<64 hex>`` (``Layout.FLAT``); a journal written in several layouts
(an old run resumed) reads as one, each blob where it was first written.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path

from assay.errors import Corrupt
from assay.journal.files import check_directory, read_file
from assay.journal.format import HASH_PREFIX, digest

BLOB_DIR = "blobs"


class Layout(enum.Enum):
    """Where a blob is kept under ``blobs/``: the folders its name's first digits make."""

    NIBBLES = (1, 1)  # blobs/a/b/<62 hex>: written now
    BYTE = (2,)  # blobs/ab/<62 hex>: journals written before the second level
    FLAT = ()  # blobs/<64 hex>: journals written before the fan-out


def blob_path(directory: Path, ref: str, layout: Layout = Layout.NIBBLES) -> Path:
    """Where blob ``ref`` (``"sha256:<hex>"``) is kept under a journal directory."""
    hexpart = ref.removeprefix(HASH_PREFIX)
    path = directory / BLOB_DIR
    for width in layout.value:
        path, hexpart = path / hexpart[:width], hexpart[width:]
    return path / hexpart


def is_ref(value: object) -> bool:
    """Whether ``value`` looks like a blob reference."""
    if not isinstance(value, str) or not value.startswith(HASH_PREFIX):
        return False
    hexpart = value[len(HASH_PREFIX) :]
    return len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart)


class BlobStore:
    """Reads and writes the blobs of one journal directory.

    ``layout`` is where new blobs are written (an older layout: for measurements against
    it and for tests of old journals); reading takes every layout regardless.
    """

    def __init__(
        self, directory: Path, *, fsync: bool = True, layout: Layout = Layout.NIBBLES
    ) -> None:
        self.directory = directory
        self.root = directory / BLOB_DIR
        self.fsync = fsync
        self.layout = layout

    def put(self, data: bytes) -> str:
        """Store ``data`` durably (idempotent) and return its reference."""
        ref = digest(data)
        if any(blob_path(self.directory, ref, layout).exists() for layout in Layout):
            return ref  # a run resumed from an old journal keeps its blobs where they are
        path = blob_path(self.directory, ref, self.layout)
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

        The blob is looked for at its path in each layout, newest first; a blob found
        anywhere else (another folder) is missing: only its own paths name it.
        """
        if not is_ref(ref):
            raise Corrupt(f"{where}: {ref!r} is not a blob reference", where=where)
        for layout in Layout:
            data = self._read(blob_path(self.directory, ref, layout), where=where)
            if data is not None:
                break
        else:
            raise Corrupt(f"{where}: blob {ref} is missing", where=where, blob=ref)
        if digest(data) != ref:
            raise Corrupt(f"{where}: blob {ref} does not match its hash", where=where, blob=ref)
        return data

    def _read(self, path: Path, *, where: str) -> bytes | None:
        """The regular file at ``path`` (None when absent); ``Corrupt`` when it, a fan-out
        folder on its way or ``blobs/`` is a symlink or not what it should be."""
        folder = self.root
        for part in ("", *path.relative_to(self.root).parts[:-1]):
            folder = folder / part if part else folder
            if not check_directory(folder, where=where):
                return None
        try:
            return read_file(path, where=f"{where}: {path.relative_to(self.directory)}")
        except FileNotFoundError:
            return None
