"""The fetch side of git's protocol v2, in process: one request for the refs that moved.

``Forge.refresh`` knows from the ls-refs answer the exact commits its cache lacks, and from
its cache the commits those refs grew from. ``git fetch`` would offer its haves 16, 32,
64… at a time, each batch one more ``upload-pack`` on a stateless server: a desk's view of
500 briefs took five. Here every have goes in the first and only request, with ``done``,
and upload-pack answers with the pack at once.

The pack is read in process, as a hostile server could write it:

- the pack's checksum, every object's size and every delta are checked; no object is
  trusted for its name: each is hashed afresh;
- the pack must be complete: every commit's tree and parents, every tree's entries and a
  tag's object are in the pack or already in the cache, and every commit asked for is in
  it, or nothing is written;
- objects are written contents first (blobs, trees below trees, commits after their
  parents), so a commit in the cache is complete at every instant, which ``refresh`` relies
  on; a SIGKILL mid-write leaves only unreachable objects.

Over smart HTTP this is one POST and no git process; a local forge gets the same request on
the stdin of its own ``git upload-pack --stateless-rpc``. What this module does not do (a
forge that does not speak v2 or a setting only git understands, a pack over
``MAX_PACK_BYTES``, an answer upload-pack refused) is :class:`NeedsGit`: the caller fetches
with git, which lists the refs again.
"""

from __future__ import annotations

import hashlib
import urllib.parse
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import ForgeUnavailable
from assay.forge.lsrefs import (
    REQUEST,
    RESULT,
    client,
    extra_headers,
    parse_pkt_lines,
    pkt,
    read_reply,
    speaks_fetch,
)
from assay.forge.lsrefs import safe_url as safe
from assay.plumbing import run_git

MAX_PACK_BYTES = 32 * 1024 * 1024  # a bigger answer (a first clone) is git's to fetch
MAX_OBJECTS = 200_000
_CHUNK = 16 * 1024
_SHA = 20
_TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
_GITLINK = b"160000"


class NeedsGit(Exception):
    """This fetch is one for ``git fetch`` (the reason says why); nothing was written."""


@dataclass(frozen=True)
class _Object:
    kind: str  # commit, tree, blob, tag
    data: bytes


def fetch(
    url: str,
    git_dir: Path,
    *,
    wants: Sequence[str],
    haves: Sequence[str],
    config: Mapping[str, str],
    display_url: str,
) -> int:
    """Bring the commits ``wants`` (with what they reach that ``haves`` do not) into
    ``git_dir``; the number of objects written. ``NeedsGit`` when git must do it."""
    if not wants:
        return 0
    where = safe(display_url)
    body = request(wants, haves)
    if url.startswith("file://") and not config:
        answer = _upload_locally(Path(urllib.parse.unquote(url[len("file://") :])), body)
    elif url.startswith(("http://", "https://")):
        headers = extra_headers(url, config)
        if headers is None or not speaks_fetch(url):
            raise NeedsGit("not a forge this module fetches from")
        answer = _post(url.rstrip("/"), body, headers=headers, where=where)
    else:
        raise NeedsGit("not a forge this module fetches from")
    objects = read_pack(pack_of(answer, where), where)
    return store(git_dir, objects, wants=wants, where=where)


def request(wants: Sequence[str], haves: Sequence[str]) -> bytes:
    """A v2 ``fetch`` that asks for ``wants``, offers every one of ``haves`` and is done."""
    from assay import __version__

    lines = [b"command=fetch\n", f"agent=assay/{__version__}\n".encode()]
    body = b"".join(pkt(line) for line in lines) + b"0001"
    args = [b"no-progress\n", b"ofs-delta\n"]
    args += [f"want {sha}\n".encode() for sha in dict.fromkeys(wants)]
    args += [f"have {sha}\n".encode() for sha in dict.fromkeys(haves)]
    return body + b"".join(pkt(line) for line in [*args, b"done\n"]) + b"0000"


def _upload_locally(path: Path, body: bytes) -> bytes:
    done = run_git(
        ["upload-pack", "--stateless-rpc", str(path)],
        input=body,
        env={"GIT_PROTOCOL": "version=2"},
        check=False,
    )
    if done.returncode != 0 or not done.stdout:
        raise NeedsGit(f"git upload-pack exited {done.returncode}")
    return done.stdout


def _post(base: str, body: bytes, *, headers: Mapping[str, str], where: str) -> bytes:
    import httpx

    request_headers = {
        **headers,
        "Content-Type": REQUEST,
        "Accept": RESULT,
        "Git-Protocol": "version=2",
    }
    try:
        with client(base).stream(
            "POST", f"{base}/git-upload-pack", headers=request_headers, content=body
        ) as reply:
            return read_reply(reply, kind=RESULT, limit=MAX_PACK_BYTES, where=where)
    except httpx.TransportError as exc:
        raise NeedsGit(f"the forge did not answer ({type(exc).__name__})") from None
    except ForgeUnavailable as refused:  # another status, type, or a pack past the limit
        raise NeedsGit(refused.message) from None


# ---------------------------------------------------------------------------- the answer


def pack_of(answer: bytes, where: str) -> bytes:
    """The pack in a v2 fetch answer: the ``packfile`` section's band-1 data."""
    lines = parse_pkt_lines(answer, display_url=where)
    if not lines or lines[0] is None:
        raise ForgeUnavailable(f"{where}: the fetch's answer is empty")
    if lines[0].startswith(b"ERR "):
        raise NeedsGit(lines[0][4:].decode("utf-8", "replace").strip()[:200])
    if lines[0] != b"packfile\n":
        raise ForgeUnavailable(f"{where}: the fetch's answer has no pack section")
    data = bytearray()
    for line in lines[1:-1]:
        if not line:
            raise ForgeUnavailable(f"{where}: unexpected packet in the fetch's pack")
        band, payload = line[0], line[1:]
        if band == 1:
            data += payload
        elif band == 3:
            raise NeedsGit(payload.decode("utf-8", "replace").strip()[:200])
        elif band != 2:
            raise ForgeUnavailable(f"{where}: unknown side-band channel {band}")
    return bytes(data)


def read_pack(pack: bytes, where: str) -> dict[str, _Object]:
    """Every object of ``pack`` by the id its content hashes to; ``ForgeUnavailable`` for
    a flaw anywhere (a checksum, a size, a delta, an object count)."""
    view = memoryview(pack)
    if len(pack) < 32 or pack[:4] != b"PACK" or int.from_bytes(pack[4:8]) not in (2, 3):
        raise ForgeUnavailable(f"{where}: the fetch's answer is not a pack")
    if hashlib.sha1(view[:-_SHA]).digest() != pack[-_SHA:]:
        raise ForgeUnavailable(f"{where}: the pack fails its checksum")
    count = int.from_bytes(pack[8:12])
    if count > MAX_OBJECTS:
        raise NeedsGit(f"a pack of {count} objects")
    end = len(pack) - _SHA
    by_offset: dict[int, _Object] = {}
    by_id: dict[str, _Object] = {}
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
            if at + _SHA > end:
                raise ForgeUnavailable(f"{where}: the pack is cut short")
            base_id, at = bytes(view[at : at + _SHA]).hex(), at + _SHA
        elif kind not in _TYPES:
            raise ForgeUnavailable(f"{where}: object type {kind} at {start}")
        data, at = _inflate(view, at, end, size, where)
        if base is not None:
            source = by_offset[base]
            found = _Object(source.kind, apply_delta(source.data, data, where))
        elif base_id:
            by_ref.append((base_id, data))
            continue
        else:
            found = _Object(_TYPES[kind], data)
        by_offset[start] = found
        by_id[object_id(found)] = found
    if at != end:
        raise ForgeUnavailable(f"{where}: {end - at} bytes after the pack's last object")
    while by_ref:  # a ref-delta's base may come later in the pack
        waiting = [(b, d) for b, d in by_ref if b not in by_id]
        for base_id, data in by_ref:
            if base_id in by_id:
                source = by_id[base_id]
                found = _Object(source.kind, apply_delta(source.data, data, where))
                by_id[object_id(found)] = found
        if len(waiting) == len(by_ref):
            raise ForgeUnavailable(f"{where}: a delta's base {waiting[0][0]} is not in the pack")
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


def object_id(found: _Object) -> str:
    header = f"{found.kind} {len(found.data)}\0".encode()
    return hashlib.sha1(header + found.data).hexdigest()


# ---------------------------------------------------------------------------- storing


def store(
    git_dir: Path, objects: Mapping[str, _Object], *, wants: Sequence[str], where: str
) -> int:
    """Write ``objects`` into ``git_dir`` contents first, once the set is known complete."""
    from assay.odb import repository

    repo = repository(git_dir)
    names = {sha: _names(found, sha, where) for sha, found in objects.items()}
    for sha, named in names.items():
        for name in named:
            if name not in objects and not repo.odb.exists(name):
                raise ForgeUnavailable(
                    f"{where}: the pack is incomplete: {objects[sha].kind} {sha} names {name}, "
                    "which neither the pack nor the cache holds"
                )
    for sha in wants:
        found = objects.get(sha)
        if (found is None or found.kind != "commit") and not _is_commit(repo, sha):
            raise ForgeUnavailable(f"{where}: the pack does not hold the commit {sha} asked for")
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
                stack.extend((name, False) for name in names[current] if name not in written)
                continue
            found = objects[current]
            oid = repo.odb.write(_KIND_NUMBERS[found.kind], found.data)
            if str(oid) != current:
                raise ForgeUnavailable(f"{where}: {current} was stored as {oid}")
            written.add(current)

    for sha in objects:
        write(sha)
    return len(written)


_KIND_NUMBERS = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}


def _is_commit(repo: Any, sha: str) -> bool:
    try:
        return bool(repo[sha].type_str == "commit")
    except (KeyError, ValueError):
        return False


def _names(found: _Object, sha: str, where: str) -> list[str]:
    """The objects ``found`` names (a commit's tree and parents, a tree's entries but
    submodule commits, a tag's object)."""
    data = found.data
    if found.kind == "blob":
        return []
    if found.kind == "tree":
        names = []
        at = 0
        while at < len(data):
            space = data.find(b" ", at)
            nul = data.find(b"\0", space + 1)
            if space < 0 or nul < 0 or nul + 1 + _SHA > len(data):
                raise ForgeUnavailable(f"{where}: the tree {sha} is malformed")
            if data[at:space] != _GITLINK:
                names.append(data[nul + 1 : nul + 1 + _SHA].hex())
            at = nul + 1 + _SHA
        return names
    header = data.split(b"\n\n", 1)[0]
    names = []
    for line in header.split(b"\n"):
        word, _, rest = line.partition(b" ")
        if (found.kind == "commit" and word in (b"tree", b"parent")) or (
            found.kind == "tag" and word == b"object"
        ):
            name = rest.decode("ascii", "replace")
            if len(name) != 2 * _SHA or not all(c in "0123456789abcdef" for c in name):
                raise ForgeUnavailable(f"{where}: the {found.kind} {sha} names {name[:48]!r}")
            names.append(name)
    if found.kind == "commit" and not header.startswith(b"tree "):
        raise ForgeUnavailable(f"{where}: the commit {sha} has no tree")
    return names
