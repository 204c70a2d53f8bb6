"""The journal reader: verifies every line's checksum, the hash chain and every blob.

A torn last line (a crash in the middle of an append) is the only damage that is
recovered, by dropping that line and reporting it; everything else (an edited line, a
missing or reordered line, a changed or missing blob, a segment without its ``continue``)
raises ``Corrupt`` naming the segment and line, and nothing of it is ever replayed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.errors import BadInput, Corrupt
from assay.journal.blobs import BlobStore
from assay.journal.format import FORMAT_VERSION, KINDS, body_of, digest

SEGMENT_PATTERN = re.compile(r"^\d{6}\.jsonl$")


class JournalVersionError(BadInput):
    """The journal was written by a newer Assay (a higher format version ``v``)."""


@dataclass(frozen=True)
class TornLine:
    """Where a torn last line was found (and dropped): segment, 1-based line, byte offset."""

    segment: str
    line: int
    offset: int


@dataclass
class Journal:
    """A verified journal: its entries in order, head hash, and what recovery dropped."""

    directory: Path
    entries: list[dict[str, Any]] = field(default_factory=list)
    head: str = ""
    segments: list[str] = field(default_factory=list)
    torn: TornLine | None = None

    @property
    def torn_line_dropped(self) -> bool:
        return self.torn is not None

    @property
    def fence(self) -> int:
        """The highest fence any entry was written under (0 for an empty journal)."""
        return max((int(e.get("fence", 0)) for e in self.entries), default=0)

    @property
    def run_id(self) -> str:
        return str(self.entries[0].get("run", "")) if self.entries else ""

    def blob(self, ref: str) -> bytes:
        """The verified bytes of blob ``ref``."""
        return BlobStore(self.directory).get(ref, where=str(self.directory))

    def load(self, ref: str) -> Any:
        """Blob ``ref`` parsed as JSON."""
        return json.loads(self.blob(ref))


def segment_files(directory: Path) -> list[Path]:
    """The segment files of a journal directory, in order."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if SEGMENT_PATTERN.match(p.name))


def read_journal(directory: Path) -> Journal:
    """Read and verify the journal in ``directory`` (an absent directory is empty)."""
    directory = Path(directory)
    journal = Journal(directory=directory)
    files = segment_files(directory)
    journal.segments = [p.name for p in files]
    blobs = BlobStore(directory)
    verified: set[str] = set()
    prev = ""
    for index, path in enumerate(files):
        last_segment = index == len(files) - 1
        data = path.read_bytes()
        chunks = data.split(b"\n")
        tail = chunks.pop()  # after the final newline: b"" unless the last write was torn
        offset = 0
        for number, raw in enumerate(chunks, start=1):
            where = f"{path.name} line {number}"
            entry = _verify_line(raw, where=where, prev=prev, seq=len(journal.entries) + 1)
            for ref in entry.get("blobs", ()):
                if ref not in verified:
                    blobs.get(ref, where=where)
                    verified.add(ref)
            if entry["kind"] == "continue" and number != len(chunks):
                raise Corrupt(f"{where}: a continue entry must end its segment", where=where)
            journal.entries.append(entry)
            prev = entry["sum"]
            offset += len(raw) + 1
        if tail:
            if not last_segment:
                raise Corrupt(
                    f"{path.name} line {len(chunks) + 1}: unterminated line in a closed segment",
                    where=path.name,
                )
            journal.torn = TornLine(path.name, len(chunks) + 1, offset)
        if not last_segment and (not chunks or journal.entries[-1]["kind"] != "continue"):
            raise Corrupt(
                f"{path.name}: segment does not end with its continue entry", where=path.name
            )
    journal.head = prev
    return journal


def _verify_line(raw: bytes, *, where: str, prev: str, seq: int) -> dict[str, Any]:
    split = body_of(raw)
    if split is None:
        raise Corrupt(f"{where}: not a journal line (no checksum)", where=where)
    body, recorded = split
    if digest(body) != recorded:
        raise Corrupt(f"{where}: checksum mismatch (the line was changed)", where=where)
    try:
        entry = json.loads(raw)
    except ValueError as exc:
        raise Corrupt(f"{where}: not valid JSON ({exc})", where=where) from None
    if not isinstance(entry, dict) or entry.get("sum") != recorded:
        raise Corrupt(f"{where}: not a journal entry", where=where)
    version = entry.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise Corrupt(f"{where}: field v (format version) is missing or invalid", where=where)
    if version > FORMAT_VERSION:
        raise JournalVersionError(
            f"{where}: journal format version {version} is newer than this Assay reads "
            f"({FORMAT_VERSION}); upgrade Assay to read it",
            where=where,
        )
    if entry.get("seq") != seq:
        raise Corrupt(
            f"{where}: seq is {entry.get('seq')!r}, expected {seq} (a line is missing or moved)",
            where=where,
        )
    if entry.get("prev") != prev:
        raise Corrupt(f"{where}: prev does not match the previous line's hash", where=where)
    if entry.get("kind") not in KINDS:
        raise Corrupt(f"{where}: unknown kind {entry.get('kind')!r}", where=where)
    return entry
