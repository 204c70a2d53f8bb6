"""Git pack files read in process, as a hostile peer could write them.

``read_pack`` checks the pack's checksum, every object's size and every delta (both kinds),
and hashes each object afresh: no object is trusted for the name it comes under.
``names`` says what an object names (a commit's tree and parents, a tree's entries but
submodule commits, a tag's object), which is what a reader checks to know a set complete;
``write_contents_first`` stores a complete set so that no stored object ever names a
missing one, even when the writer is killed mid-way.

The fetch (:mod:`assay.forge.fetchpack`) and the forge server's receive
(:mod:`assay.forge.receivepack`) both read their packs here.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from assay.errors import ForgeUnavailable

MAX_OBJECTS = 200_000
_CHUNK = 16 * 1024
SHA_BYTES = 20
_TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
KIND_NUMBERS = {kind: number for number, kind in _TYPES.items()}
_OFS_DELTA, _REF_DELTA = 6, 7
_GITLINK = b"160000"


class TooLarge(Exception):
    """A pack of more objects than this module reads (the count says how many)."""


@dataclass(frozen=True)
class PackObject:
    kind: str  # commit, tree, blob, tag
    data: bytes


def read_pack(
    pack: bytes, where: str, *, bases: Callable[[str], PackObject | None] | None = None
) -> dict[str, PackObject]:
    """Every object of ``pack`` by the id its content hashes to; ``ForgeUnavailable`` for
    a flaw anywhere (a checksum, a size, a delta, an object count). ``bases`` finds a
    ref-delta's base that is not in the pack (a thin pack's, in the repository); it is not
    itself returned."""
    view = memoryview(pack)
    if len(pack) < 32 or pack[:4] != b"PACK" or int.from_bytes(pack[4:8]) not in (2, 3):
        raise ForgeUnavailable(f"{where}: the answer is not a pack")
    if hashlib.sha1(view[:-SHA_BYTES]).digest() != pack[-SHA_BYTES:]:
        raise ForgeUnavailable(f"{where}: the pack fails its checksum")
    count = int.from_bytes(pack[8:12])
    if count > MAX_OBJECTS:
        raise TooLarge(f"a pack of {count} objects")
    end = len(pack) - SHA_BYTES
    by_offset: dict[int, PackObject] = {}
    by_id: dict[str, PackObject] = {}
    by_ref: list[tuple[str, bytes]] = []  # ref-deltas: base id, delta
    at = 12
    for _ in range(count):
        start = at
        kind, size, at = _entry_header(view, at, end, where)
        base: int | None = None
        base_id = ""
        if kind == _OFS_DELTA:
            distance, at = _offset(view, at, end, where)
            base = start - distance
            if base not in by_offset:
                raise ForgeUnavailable(f"{where}: a delta at {start} names no object before it")
        elif kind == _REF_DELTA:
            if at + SHA_BYTES > end:
                raise ForgeUnavailable(f"{where}: the pack is cut short")
            base_id, at = bytes(view[at : at + SHA_BYTES]).hex(), at + SHA_BYTES
        elif kind not in _TYPES:
            raise ForgeUnavailable(f"{where}: object type {kind} at {start}")
        data, at = _inflate(view, at, end, size, where)
        if base is not None:
            source = by_offset[base]
            found = PackObject(source.kind, apply_delta(source.data, data, where))
        elif base_id:
            by_ref.append((base_id, data))
            continue
        else:
            found = PackObject(_TYPES[kind], data)
        by_offset[start] = found
        by_id[object_id(found)] = found
    if at != end:
        raise ForgeUnavailable(f"{where}: {end - at} bytes after the pack's last object")
    outside: dict[str, PackObject] = {}  # bases found by ``bases``
    while by_ref:  # a ref-delta's base may come later in the pack
        waiting = [(b, d) for b, d in by_ref if b not in by_id and b not in outside]
        for base_id, data in by_ref:
            known = by_id.get(base_id) or outside.get(base_id)
            if known is not None:
                found = PackObject(known.kind, apply_delta(known.data, data, where))
                by_id[object_id(found)] = found
        if len(waiting) == len(by_ref):
            found_outside = {b: bases(b) for b, _ in waiting} if bases is not None else {}
            outside.update({b: o for b, o in found_outside.items() if o is not None})
            if not any(b in outside for b, _ in waiting):
                raise ForgeUnavailable(
                    f"{where}: a delta's base {waiting[0][0]} is not in the pack"
                )
        by_ref = waiting
    return by_id


def _entry_header(view: memoryview, at: int, end: int, where: str) -> tuple[int, int, int]:
    if at >= end:
        raise ForgeUnavailable(f"{where}: the pack is cut short")
    byte = view[at]
    kind, size, shift = (byte >> 4) & 7, byte & 15, 4
    at += 1
    while byte & 0x80:
        if at >= end or shift > 60:
            raise ForgeUnavailable(f"{where}: a malformed object header in the pack")
        byte = view[at]
        size |= (byte & 0x7F) << shift
        shift += 7
        at += 1
    return kind, size, at


def _offset(view: memoryview, at: int, end: int, where: str) -> tuple[int, int]:
    if at >= end:
        raise ForgeUnavailable(f"{where}: the pack is cut short")
    byte = view[at]
    distance = byte & 0x7F
    at += 1
    while byte & 0x80:
        if at >= end or distance > 1 << 56:
            raise ForgeUnavailable(f"{where}: a malformed delta offset in the pack")
        byte = view[at]
        distance = ((distance + 1) << 7) | (byte & 0x7F)
        at += 1
    return distance, at


def _inflate(view: memoryview, at: int, end: int, size: int, where: str) -> tuple[bytes, int]:
    """The ``size`` bytes the zlib stream at ``at`` inflates to, and where the next begins."""
    stream = zlib.decompressobj()
    parts: list[bytes] = []
    got = 0
    fed = at
    try:
        while not stream.eof:  # one chunk inflates to at most ~1,000 times its size
            if fed >= end:
                raise ForgeUnavailable(f"{where}: an object is cut short")
            chunk = view[fed : min(fed + _CHUNK, end)]
            fed += len(chunk)
            part = stream.decompress(chunk)
            got += len(part)
            if got > size:
                raise ForgeUnavailable(f"{where}: an object inflates past its size")
            parts.append(part)
    except zlib.error as exc:
        raise ForgeUnavailable(f"{where}: a malformed object in the pack ({exc})") from None
    if got != size:
        raise ForgeUnavailable(f"{where}: an object inflates to {got} bytes, not {size}")
    return b"".join(parts), fed - len(stream.unused_data)


def apply_delta(base: bytes, delta: bytes, where: str) -> bytes:
    """``base`` rebuilt by git's delta instructions (copy from the base, insert new bytes)."""
    source, at = _varint(delta, 0, where)
    target, at = _varint(delta, at, where)
    if source != len(base):
        raise ForgeUnavailable(f"{where}: a delta for a {source}-byte base got {len(base)}")
    out = bytearray()
    while at < len(delta):
        op = delta[at]
        at += 1
        if op & 0x80:
            offset = length = 0
            for bit in range(4):
                if op & (1 << bit):
                    offset |= _byte(delta, at, where) << (8 * bit)
                    at += 1
            for bit in range(3):
                if op & (1 << (4 + bit)):
                    length |= _byte(delta, at, where) << (8 * bit)
                    at += 1
            length = length or 0x10000
            if offset + length > len(base):
                raise ForgeUnavailable(f"{where}: a delta copies past its base")
            out += base[offset : offset + length]
        elif op:
            if at + op > len(delta):
                raise ForgeUnavailable(f"{where}: a delta is cut short")
            out += delta[at : at + op]
            at += op
        else:
            raise ForgeUnavailable(f"{where}: a delta uses the reserved instruction 0")
        if len(out) > target:
            raise ForgeUnavailable(f"{where}: a delta builds past its size")
    if len(out) != target:
        raise ForgeUnavailable(f"{where}: a delta builds {len(out)} bytes, not {target}")
    return bytes(out)


def _varint(data: bytes, at: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = _byte(data, at, where)
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at
        if shift > 63:
            raise ForgeUnavailable(f"{where}: a malformed delta size")


def _byte(data: bytes, at: int, where: str) -> int:
    if at >= len(data):
        raise ForgeUnavailable(f"{where}: a delta is cut short")
    return data[at]


def object_id(found: PackObject) -> str:
    header = f"{found.kind} {len(found.data)}\0".encode()
    return hashlib.sha1(header + found.data).hexdigest()


def write_contents_first(repo: Any, objects: Mapping[str, PackObject], where: str) -> int:
    """Write ``objects`` (a set known complete) into ``repo``'s object database, each after
    every object it names (blobs, trees below trees, commits after their parents); the
    number written. A writer killed mid-way leaves only objects whose names all exist."""
    from assay.plumbing import local_disk  # a full disk: NoSpace (69), not a bare GitError

    named = {sha: names(found, sha, where) for sha, found in objects.items()}
    written: set[str] = set()

    def write(sha: str) -> None:
        # Depth-first over what each object names, iteratively: a long history is no
        # recursion limit.
        stack = [(sha, False)]
        while stack:
            current, ready = stack.pop()
            if current in written or current not in objects:
                continue
            if not ready:
                stack.append((current, True))
                stack.extend((name, False) for name in named[current] if name not in written)
                continue
            found = objects[current]
            oid = repo.odb.write(KIND_NUMBERS[found.kind], found.data)
            if str(oid) != current:
                raise ForgeUnavailable(f"{where}: {current} was stored as {oid}")
            written.add(current)

    with local_disk(str(getattr(repo, "path", where))):
        for sha in objects:
            write(sha)
    return len(written)


def first_gap(repo: Any, objects: Mapping[str, PackObject], where: str) -> tuple[str, str] | None:
    """The first ``(object, name)`` where an object of ``objects`` names one that neither
    ``objects`` nor ``repo``'s object database holds; None when the set is complete."""
    held = set(objects)
    for sha, found in objects.items():
        for name in names(found, sha, where):
            if name not in held:
                if not repo.odb.exists(name):
                    return sha, name
                held.add(name)
    return None


def names(found: PackObject, sha: str, where: str) -> list[str]:
    """The objects ``found`` names (a commit's tree and parents, a tree's entries but
    submodule commits, a tag's object)."""
    data = found.data
    if found.kind == "blob":
        return []
    if found.kind == "tree":
        return [named for mode, _, named in tree_entries(data, sha, where) if mode != _GITLINK]
    header = data.split(b"\n\n", 1)[0]
    names = []
    for line in header.split(b"\n"):
        word, _, rest = line.partition(b" ")
        if (found.kind == "commit" and word in (b"tree", b"parent")) or (
            found.kind == "tag" and word == b"object"
        ):
            name = rest.decode("ascii", "replace")
            if len(name) != 2 * SHA_BYTES or not all(c in "0123456789abcdef" for c in name):
                raise ForgeUnavailable(f"{where}: the {found.kind} {sha} names {name[:48]!r}")
            names.append(name)
    if found.kind == "commit" and not header.startswith(b"tree "):
        raise ForgeUnavailable(f"{where}: the commit {sha} has no tree")
    return names


def tree_entries(data: bytes, sha: str, where: str) -> list[tuple[bytes, bytes, str]]:
    """``(mode, name, object)`` of each entry of the tree ``sha`` whose bytes are ``data``;
    ``ForgeUnavailable`` when they do not parse."""
    entries = []
    at = 0
    while at < len(data):
        space = data.find(b" ", at)
        nul = data.find(b"\0", space + 1)
        if space < 0 or nul < 0 or nul + 1 + SHA_BYTES > len(data):
            raise ForgeUnavailable(f"{where}: the tree {sha} is malformed")
        entries.append(
            (data[at:space], data[space + 1 : nul], data[nul + 1 : nul + 1 + SHA_BYTES].hex())
        )
        at = nul + 1 + SHA_BYTES
    return entries
