"""The journal reader: verifies every line's checksum, the hash chain and every blob.

A torn last line (a crash in the middle of an append) is the only damage that is
recovered, by dropping that line and reporting it; everything else (an edited line, a
missing or reordered line, a changed or missing blob, a segment without its ``continue``)
raises ``Corrupt`` naming the segment and line, and nothing of it is ever replayed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.errors import BadInput, Corrupt
from assay.journal.blobs import BlobStore
from assay.journal.files import check_directory, read_file
from assay.journal.format import FORMAT_VERSION, HASH_PREFIX, KINDS, SUM_MARKER

SEGMENT_PATTERN = re.compile(r"^\d{6}\.jsonl$")
_MARK = SUM_MARKER.encode("ascii")
_MARK_LEN = len(_MARK)


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
    fence: int = 0  # the highest fence any entry was written under (0 when empty)

    @property
    def torn_line_dropped(self) -> bool:
        return self.torn is not None

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
    if not check_directory(directory, where=directory.name):
        return []
    return sorted(p for p in directory.iterdir() if SEGMENT_PATTERN.match(p.name))


def read_journal(directory: Path) -> Journal:
    """Read and verify the journal in ``directory`` (an absent directory is empty)."""
    directory = Path(directory)
    journal = Journal(directory=directory)
    segments = ((path.name, read_file(path, where=path.name)) for path in segment_files(directory))
    verify_segments(journal, segments, blobs=BlobStore(directory))
    return journal


def verify_segments(
    journal: Journal, segments: Iterable[tuple[str, bytes]], *, blobs: BlobStore | None
) -> None:
    """The one journal check: every line of ``segments`` (``(name, bytes)``, in order)
    verified and appended to ``journal`` as it goes, so a caller that catches the
    ``Corrupt`` still holds the lines before the damage and their head; the blobs lines
    list are verified in ``blobs`` (None: a reader that reads no payload, the board)."""
    verified: set[str] = set()
    pending = list(segments)
    for index, (name, data) in enumerate(pending):
        last_segment = index == len(pending) - 1
        journal.segments.append(name)
        chunks = data.split(b"\n")
        tail = chunks.pop()  # after the final newline: b"" unless the last write was torn
        offset = 0
        parsed = _parse_all(chunks)
        for number, raw in enumerate(chunks, start=1):
            where = f"{name} line {number}"
            entry = _verify_line(
                raw,
                parsed[number - 1] if parsed is not None else None,
                where=where,
                prev=journal.head,
                seq=len(journal.entries) + 1,
            )
            if "blobs" in entry and blobs is not None:
                for ref in _listed_blobs(entry, where=where):
                    if ref not in verified:
                        blobs.get(ref, where=where)
                        verified.add(ref)
            if entry["kind"] == "continue" and number != len(chunks):
                raise Corrupt(f"{where}: a continue entry must end its segment", where=where)
            journal.entries.append(entry)
            journal.head = entry["sum"]
            if entry["fence"] > journal.fence:
                journal.fence = entry["fence"]
            offset += len(raw) + 1
        if tail:
            if not last_segment:
                raise Corrupt(
                    f"{name} line {len(chunks) + 1}: unterminated line in a closed segment",
                    where=name,
                )
            journal.torn = TornLine(name, len(chunks) + 1, offset)
        if not last_segment and (not chunks or journal.entries[-1]["kind"] != "continue"):
            raise Corrupt(f"{name}: segment does not end with its continue entry", where=name)


def _listed_blobs(entry: dict[str, Any], *, where: str) -> list[str]:
    """The blob references a line lists, which the read verifies before anything uses them."""
    refs = entry.get("blobs")
    if refs is None:
        return []
    if type(refs) is not list or not all(type(ref) is str for ref in refs):
        raise Corrupt(f"{where}: field blobs is not a list of blob references", where=where)
    return refs


def _parse_all(lines: list[bytes]) -> list[Any] | None:
    """Parse every line with one ``json.loads`` (resuming reads 10,000 lines fast).

    None when that fails or the count differs (a line holding two values): the caller
    then parses line by line, which names the damaged line.
    """
    try:
        values = json.loads("[" + ",".join(raw.decode("ascii") for raw in lines) + "]")
    except ValueError:
        return None
    return values if isinstance(values, list) and len(values) == len(lines) else None


def _verify_line(raw: bytes, entry: Any, *, where: str, prev: str, seq: int) -> dict[str, Any]:
    # The hot path of every resume: one rfind, one sha256 and a few dict lookups a line.
    at = raw.rfind(_MARK)
    if at <= 0 or not raw.endswith(b'"}'):
        raise Corrupt(f"{where}: not a journal line (no checksum)", where=where)
    recorded = raw[at + _MARK_LEN : -2].decode("ascii", errors="replace")
    if HASH_PREFIX + hashlib.sha256(raw[:at] + b"}").hexdigest() != recorded:
        raise Corrupt(f"{where}: checksum mismatch", where=where)
    if entry is None:
        try:
            entry = json.loads(raw)
        except ValueError as exc:
            raise Corrupt(f"{where}: not valid JSON ({exc})", where=where) from None
    if (
        type(entry) is dict
        and entry.get("sum") == recorded
        and entry.get("v") == FORMAT_VERSION
        and entry.get("seq") == seq
        and entry.get("prev") == prev
        and type(entry.get("kind")) is str
        and entry["kind"] in KINDS
        and type(entry.get("fence")) is int
    ):
        return entry
    return _explain(entry, recorded, where=where, prev=prev, seq=seq)


def _explain(entry: Any, recorded: str, *, where: str, prev: str, seq: int) -> dict[str, Any]:
    """Raise the precise error for a line that failed the fast checks."""
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
    if type(entry.get("kind")) is not str or entry["kind"] not in KINDS:
        raise Corrupt(f"{where}: unknown kind {entry.get('kind')!r}", where=where)
    raise Corrupt(f"{where}: field fence is missing or not an integer", where=where)
