"""Reading a journal's files from disk: regular files only, never more than a bound.

A journal directory can come from a hostile commit (a brief's branch, checked out by a desk
or the gate), where a segment or blob may be a symlink (to ``/dev/zero``, to a host file, to
nothing), a FIFO or a device. Every read of a segment or blob goes through ``read_file``:
the final component is opened without following a link and must be a regular file no
larger than ``MAX_FILE_BYTES``; anything else is ``Corrupt`` naming the path, before a byte
of it is trusted.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from assay.errors import Corrupt

# The most one segment or blob may hold. A segment rolls at ``segment_bytes`` (64 KiB by
# default) plus its last line; a blob holds one payload (a model message, a tool's output,
# an upstream reply the gateway bounded at 32 MiB). Far above both, far below memory.
MAX_FILE_BYTES = 256 * 1024 * 1024

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


def read_file(path: Path, *, where: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at ``path`` (``FileNotFoundError`` when absent);
    ``Corrupt`` naming ``where`` for a symlink, a non-regular file or one over ``limit``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Corrupt(
                f"{where}: {path} is a symlink, not a regular file", where=where
            ) from None
        if exc.errno == errno.ENOENT:
            raise
        raise Corrupt(f"{where}: {path} cannot be read: {exc.strerror}", where=where) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise Corrupt(f"{where}: {path} is {kind}, not a regular file", where=where)
        if info.st_size > limit:
            raise Corrupt(
                f"{where}: {path} is over the {limit} bytes a journal file may hold", where=where
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # the size can grow under us: never read past the bound
            chunk = os.read(fd, min(1024 * 1024, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Corrupt(
                f"{where}: {path} is over the {limit} bytes a journal file may hold", where=where
            )
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_directory(path: Path, *, where: str) -> bool:
    """Whether the journal directory ``path`` exists; ``Corrupt`` when it (its last
    component) is a symlink or not a directory."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        raise Corrupt(f"{where}: {path} is a symlink, not a directory", where=where)
    if not stat.S_ISDIR(info.st_mode):
        raise Corrupt(f"{where}: {path} is not a directory", where=where)
    return True


def check_tree(root: Path, relative: str) -> None:
    """``Corrupt`` naming the path when a checkout's journal at ``relative`` under ``root``
    holds anything but folders and regular files: a folder on the way (``.assay``,
    ``.assay/journal``, the brief's), ``blobs/`` or a fan-out folder in it that is a symlink
    or not a folder, or a segment or blob that is a symlink, a FIFO or a device. A hostile
    commit could otherwise point the journal's reader or writer anywhere; lstat only,
    nothing is opened."""
    here = root
    for part in Path(relative).parts:
        here = here / part
        if not check_directory(here, where=relative):
            return
    entries = sorted(here.iterdir())
    blobs = here / "blobs"
    if check_directory(blobs, where=f"{relative}/blobs"):
        entries = [entry for entry in entries if entry != blobs]
        entries += _fanned_out(blobs, root, levels=2)
    for entry in entries:
        mode = entry.lstat().st_mode
        if not stat.S_ISREG(mode):
            kind = "a symlink" if stat.S_ISLNK(mode) else _KINDS.get(stat.S_IFMT(mode), "")
            name = entry.relative_to(root)
            raise Corrupt(f"{name}: {kind or 'special'}, not a regular file", where=str(name))


def _fanned_out(folder: Path, root: Path, *, levels: int) -> list[Path]:
    """Everything under a blobs folder down through ``levels`` of fan-out folders
    (``blobs/a/b/``, ``blobs/ab/``; a flat journal's blobs are files in ``blobs/`` itself);
    a folder deeper than that is listed as an entry, and refused as not a regular file."""
    found: list[Path] = []
    for entry in sorted(folder.iterdir()):
        nested = levels > 0 and not entry.is_symlink() and entry.is_dir()
        if nested and check_directory(entry, where=str(entry.relative_to(root))):
            found += _fanned_out(entry, root, levels=levels - 1)
        else:
            found.append(entry)
    return found
