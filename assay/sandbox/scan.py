"""The checkpoint scan: no secret value, in any common encoding, reaches a pushed commit.

Redaction keeps raw values out of journal lines; it cannot see a secret the agent wrote
into a file, reversed it, or base64-encoded it. Before every checkpoint commit the desk's
hook calls ``CheckpointScan.check()``: every file the commit would change (its name and
its contents; for journal segments, only the bytes added since the last scan) is searched
for each secret as raw text, base64 and base64url (at every alignment, so a secret inside
a longer encoded string such as an ``Authorization: Basic`` header is found), hex (either
case), URL-encoding and reversed, each also with the file's whitespace removed (a secret
spaced out or split across lines). A hit raises ``Denied`` naming the file and the
encoding, never the value.
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from assay.errors import Denied

MIN_SECRET = 6  # shorter values would match ordinary text everywhere
WINDOW = 8 << 20  # bytes of a file scanned at once
_WHITESPACE = re.compile(rb"\s+")


@dataclass(frozen=True)
class Needle:
    encoding: str
    data: bytes


def _base64_cores(raw: bytes, *, urlsafe: bool) -> Iterator[bytes]:
    """The characters of ``raw``'s base64 that do not depend on its neighbours, for each of
    the three alignments it can have inside a longer encoded string."""
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    for shift in range(3):
        encoded = encode(b"\0" * shift + raw)
        whole_groups = (shift + len(raw)) // 3
        core = encoded[4 if shift else 0 : 4 * whole_groups]
        if len(core) >= 8:
            yield core


def needles(secret: str) -> list[Needle]:
    """Every form of ``secret`` the scan looks for."""
    raw = secret.encode("utf-8")
    found = [Needle("raw", raw), Needle("reversed", raw[::-1])]
    found += [Needle("base64", core) for core in _base64_cores(raw, urlsafe=False)]
    found += [Needle("base64url", core) for core in _base64_cores(raw, urlsafe=True)]
    found += [Needle("hex", raw.hex().encode()), Needle("hex", raw.hex().upper().encode())]
    for quoted in {urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}:
        found.append(Needle("url-encoding", quoted.encode()))
    unique: dict[bytes, Needle] = {}
    for needle in found:
        unique.setdefault(needle.data, needle)
    return list(unique.values())


def find_secret(data: bytes, table: list[Needle]) -> str | None:
    """The encoding of the first secret form in ``data`` (also with whitespace removed)."""
    squeezed = _WHITESPACE.sub(b"", data)
    for needle in table:
        if needle.data in data:
            return needle.encoding
        if needle.data in squeezed:
            return f"{needle.encoding}, spaced"
    return None


class CheckpointScan:
    """Scans what a checkpoint would commit; one per desk session (it remembers how much of
    each journal segment it has already read)."""

    def __init__(self, secrets: Iterable[str], *, journal_dir: Path | None = None) -> None:
        values = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)
        self.table = [needle for value in values for needle in needles(value)]
        self.journal_dir = journal_dir
        self._journal_offsets: dict[Path, int] = {}
        self._pending: dict[Path, int] = {}
        self._blobs_seen: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.table)

    def check_worktree(self, root: Path) -> None:
        """``check`` every path the next checkpoint of ``root`` would commit: what ``git
        status`` reports, plus the journal's new lines and blobs (committed even when a
        ``.gitignore`` says otherwise)."""
        if not self.table:
            return
        names = changed_paths(root)
        if self.journal_dir is not None and self.journal_dir.is_dir():
            names += sorted(self._journal_names(root, self.journal_dir))
        self.check(root, dict.fromkeys(names))
        self._blobs_seen.update(n for n in names if "/blobs/" in n)

    def _journal_names(self, root: Path, journal: Path) -> Iterator[str]:
        """The journal's files (relative, POSIX) but the blobs scanned before, which are
        content-addressed: once clean, always clean. Walked with ``os.scandir`` and plain
        strings: this runs at every checkpoint, and the folder grows with the run."""
        base = journal.relative_to(root).as_posix()
        stack = [(str(journal), base)]
        while stack:
            folder, relative = stack.pop()
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = f"{relative}/{entry.name}"
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, name))
                        yield name  # as rglob listed it: a folder is read as b""
                    elif "/blobs/" not in name or name not in self._blobs_seen:
                        yield name

    def check(self, root: Path, changed: Iterable[str]) -> None:
        """``Denied`` (77) naming the first of ``changed`` (paths under ``root``) that holds a
        secret in its name or contents."""
        if not self.table:
            return
        self._pending = {}
        for name in changed:
            encoding = find_secret(name.encode("utf-8", "surrogateescape"), self.table)
            if encoding is not None:
                raise Denied(
                    f"checkpoint refused: the file name {name!r} holds a secret ({encoding})"
                )
            path = root / name
            for data in self._windows(path):
                encoding = find_secret(data, self.table)
                if encoding is not None:
                    raise Denied(
                        f"checkpoint refused: {name} holds the value of a secret ({encoding})",
                        file=name,
                    )
        self._journal_offsets.update(self._pending)

    def _windows(self, path: Path) -> Iterator[bytes]:
        """``path``'s bytes in overlapping windows: constant memory for a huge file, and a
        secret (even spaced out) straddling two windows is still whole in one of them."""
        data = self._read(path)
        if data is not None:
            yield data
            return
        try:
            with open(path, "rb") as handle:
                overlap = 8 * max((len(n.data) for n in self.table), default=0)
                previous = b""
                while chunk := handle.read(WINDOW):
                    yield previous + chunk
                    previous = chunk[-overlap:]
        except OSError:
            return

    def _read(self, path: Path) -> bytes | None:
        """A symlink's target or a journal segment's new bytes (``b""`` for what is not a
        regular file); None for a regular file, which ``_windows`` reads in pieces."""
        try:
            if path.is_symlink():
                return os.readlink(path).encode("utf-8", "surrogateescape")
            if not path.is_file():
                return b""
            if self.journal_dir is not None and path.parent == self.journal_dir:
                return self._journal_tail(path)
            return None
        except OSError:
            return b""

    def _journal_tail(self, path: Path) -> bytes:
        """The journal bytes added since the last scan (segments only grow)."""
        offset = self._journal_offsets.get(path, 0)
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            if size < offset:
                offset = 0
            handle.seek(offset)
            data = handle.read()
        # Re-read the last partial line next time: a secret may straddle two scans.
        cut = data.rfind(b"\n") + 1
        self._pending[path] = offset + cut
        return data


def changed_paths(root: Path) -> list[str]:
    """Paths (relative, POSIX) that ``git add --all`` in ``root`` would stage: modified,
    added, renamed and untracked files, not ignored ones."""
    from assay.plumbing import changed_files

    return changed_files(root)
