"""The journal writer: one fsynced JSON line per entry, chained, redacted, segmented.

The writer owns the tail of a journal directory. Opening it verifies what is there
(``read_journal``), cuts off a torn last line if the previous process died mid-append,
and continues the chain. Each ``append`` fills ``v``, ``seq``, ``prev``, ``run`` and
``fence``, scrubs secrets, writes the line and (unless the caller group-commits) fsyncs.
Past ``segment_bytes`` the writer rolls to a new segment: it appends a ``continue`` entry
carrying a snapshot of the last checkpoint, and the chain runs on in the next file.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from assay.errors import BadInput, Busy
from assay.journal.blobs import BlobStore
from assay.journal.entries import Continue, Entry, entry_json
from assay.journal.format import FORMAT_VERSION, KINDS, canonical, encode_line, segment_name
from assay.journal.reader import Journal, read_journal
from assay.journal.redact import Redactor

# Small, because on a forge every checkpoint commits the active segment whole (a new git
# blob each time) while rolled segments are never written again: docs/journal.md.
DEFAULT_SEGMENT_BYTES = 64 * 1024
INLINE_LIMIT = 2048  # outputs whose JSON is longer than this go to blobs/


class JournalWriter:
    """Appends entries to one journal directory; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        journal: Journal,
        *,
        run_id: str,
        secrets: Iterable[str],
        segment_bytes: int,
        fsync: bool = True,
    ) -> None:
        self.directory = directory
        self.run_id = run_id
        self.redactor = Redactor(secrets)
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.blobs = BlobStore(directory, fsync=fsync)
        self.journal = journal
        self._lock: int | None = None
        self._torn = journal.torn
        self.seq = len(journal.entries)
        self.head = journal.head
        self.fence = journal.fence
        # The snapshot a `continue` carries; found lazily, since rolling is rare and
        # scanning every entry on each open would slow every resume.
        self._earlier = journal.entries
        self.last_checkpoint: Any = None
        self._segment = len(journal.segments) or 1
        last = directory / segment_name(self._segment)
        self._size = last.stat().st_size if last.exists() else 0
        if journal.entries and journal.entries[-1]["kind"] == "continue" and self._size:
            # The previous writer rolled and wrote nothing after. An empty last file is the
            # next segment itself (a writer killed between creating it and its first line).
            self._segment += 1
            self._size = 0
        # Opened at the first line written to it: a writer that writes nothing (a resume
        # refused, a fenced holder) leaves no new segment file behind.
        self._handle: BinaryIO | None = None

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        run_id: str | None = None,
        secrets: Iterable[str] = (),
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        journal: Journal | None = None,
        fsync: bool = True,
    ) -> JournalWriter:
        """Open (creating) the journal in ``directory`` for appending.

        Takes an exclusive lock on the directory first (``Busy`` if another writer holds
        it), then reads and verifies the journal (``writer.journal``) unless the caller
        passes a ``read_journal`` result for it as ``journal``.
        ``fsync=False`` keeps lines and blobs in the page cache: they survive a killed
        process but not a power loss (for throwaway runs and size measurements; never for
        a desk's real journal).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        lock = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise Busy(f"{directory}: another process is writing this journal") from None
        try:
            if journal is None:
                journal = read_journal(directory)
            rid = journal.run_id or run_id or uuid.uuid4().hex
            writer = cls(
                directory,
                journal,
                run_id=rid,
                secrets=secrets,
                segment_bytes=segment_bytes,
                fsync=fsync,
            )
        except BaseException:
            os.close(lock)
            raise
        writer._lock = lock
        return writer

    def close(self) -> None:
        """Close the segment and release the directory lock."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases the flock
            self._lock = None

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put_blob(self, payload: bytes | Any) -> str:
        """Store a payload (bytes, or a JSON value stored canonically) and return its ref."""
        if isinstance(payload, bytes | bytearray):
            data = self.redactor.data(bytes(payload))
        else:
            data = canonical(self.redactor.value(payload)).encode("ascii")
        return self.blobs.put(data)

    def pack(self, value: Any) -> tuple[dict[str, Any], list[str]]:
        """``({"value": v} | {"blob": ref}, blobs referenced)`` for an output or input."""
        value = self.redactor.value(value)
        text = canonical(value)
        if len(text) <= INLINE_LIMIT:
            return {"value": value}, []
        ref = self.blobs.put(text.encode("ascii"))
        return {"blob": ref}, [ref]

    def append(self, entry: Entry | dict[str, Any], *, sync: bool = True) -> dict[str, Any]:
        """Append one entry (a typed record of ``assay.journal.entries``, or its encoded
        dict); returns the full line as a dict (with ``seq``, ``sum``, …).

        With ``sync=False`` the line is written but not fsynced: the next synced append
        makes it durable too (group commit for cheap entries).
        """
        entry = entry_json(entry)
        kind = entry.get("kind")
        if kind not in KINDS:
            raise BadInput(f"journal entry kind {kind!r} is not one of {sorted(KINDS)}")
        if self._torn is not None:
            self._cut_torn_line()
        line: dict[str, Any] = self.redactor.value(dict(entry))
        line.pop("sum", None)
        line.update(v=FORMAT_VERSION, seq=self.seq + 1, prev=self.head, run=self.run_id)
        line["fence"] = self.fence
        try:
            raw, total = encode_line(line)
        except ValueError as exc:
            raise BadInput(f"journal entry {kind} is not JSON-encodable: {exc}") from None
        handle = self._segment_file()
        handle.write(raw + b"\n")
        handle.flush()
        if sync and self.fsync:
            os.fsync(handle.fileno())
        self._size += len(raw) + 1
        self.seq += 1
        self.head = total
        line["sum"] = total
        if kind == "checkpoint":
            self.last_checkpoint = line.get("out")
        if self._size >= self.segment_bytes and kind != "continue":
            self._roll()
        return line

    def _cut_torn_line(self) -> None:
        # The torn bytes were never acknowledged to anyone: cut them, just before the first
        # append, so the next line starts clean. Every complete line stays as it was. (Not
        # at open: a holder that turns out to be fenced must write nothing at all.)
        assert self._torn is not None
        with open(self.directory / self._torn.segment, "r+b") as handle:
            handle.truncate(self._torn.offset)
            handle.flush()
            os.fsync(handle.fileno())
        if self._torn.segment == segment_name(self._segment):
            self._size = self._torn.offset
        self._torn = None

    def sync(self) -> None:
        """Make every written line durable."""
        if self._handle is None:
            return  # nothing written since the last roll
        self._handle.flush()
        if self.fsync:
            os.fsync(self._handle.fileno())

    def _segment_file(self) -> BinaryIO:
        """The current segment, opened (and created, the folder's entry made durable) at
        its first line."""
        if self._handle is None:
            path = self.directory / segment_name(self._segment)
            created = not path.exists()
            self._handle = open(path, "ab")  # noqa: SIM115
            if created:
                fd = os.open(self.directory, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        return self._handle

    def _roll(self) -> None:
        nxt = segment_name(self._segment + 1)
        if self.last_checkpoint is None:
            earlier = (e for e in reversed(self._earlier) if e["kind"] == "checkpoint")
            self.last_checkpoint = next((e.get("out") for e in earlier), None)
        snapshot = self.last_checkpoint
        self.append(Continue(segment=nxt, snapshot=snapshot))
        assert self._handle is not None  # the continue line was just written to it
        self._handle.close()
        self._handle = None  # the next segment is created with its first line
        self._segment += 1
        self._size = 0


def load_packed(journal_dir: Path, packed: Any) -> Any:
    """The value of a ``pack()`` result read back from a journal directory."""
    if not isinstance(packed, dict):
        return None
    if "blob" in packed:
        return json.loads(BlobStore(Path(journal_dir)).get(packed["blob"], where="out"))
    return packed.get("value")
