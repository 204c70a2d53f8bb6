"""The fetch side of git's protocol v2, in process: one request for the refs that moved.

``Forge.refresh`` knows from the ls-refs answer the exact commits its cache lacks, and from
its cache the commits those refs grew from. ``git fetch`` would offer its haves 16, 32,
64… at a time, each batch one more ``upload-pack`` on a stateless server: a desk's view of
500 briefs took five. Here every have goes in the first and only request, with ``done``,
and upload-pack answers with the pack at once.

The pack is read in process (:mod:`assay.forge.packfile`), as a hostile server could
write it:

- the pack's checksum, every object's size and every delta are checked; no object is
  trusted for its name: each is hashed afresh;
- the pack must be complete: every commit's tree and parents, every tree's entries and a
  tag's object are in the pack or already in the cache, and every commit asked for is in
  it, or nothing is written;
- objects are written contents first (blobs, trees below trees, commits after their
  parents), so a commit in the cache is complete at every instant, which ``refresh`` relies
  on; a SIGKILL mid-write leaves only unreachable objects.

Over smart HTTP this is one POST and no git process. From a local forge the objects are
copied straight from its object store (no more than ``assay.odb.MAX_COPIED_COMMITS``
commits, each object hashed afresh, contents first); past that, its own
``git upload-pack --stateless-rpc`` gets the same request on its stdin. What this module
does not do (a forge that does not speak v2 or a setting only git understands, a pack over
``MAX_PACK_BYTES``, an answer upload-pack refused) is :class:`NeedsGit`: the caller
fetches with git, which lists the refs again.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from assay.errors import ForgeUnavailable
from assay.forge.lsrefs import (
    REQUEST,
    RESULT,
    client,
    extra_headers,
    parse_pkt_lines,
    read_reply,
    speaks_fetch,
)
from assay.forge.lsrefs import safe_url as safe
from assay.forge.packfile import (
    PackObject,
    TooLarge,
    first_gap,
    read_pack,
    write_contents_first,
)
from assay.forge.smarthttp import pkt_line
from assay.plumbing import run_git

MAX_PACK_BYTES = 32 * 1024 * 1024  # a bigger answer (a first clone) is git's to fetch


class NeedsGit(Exception):
    """This fetch is one for ``git fetch`` (the reason says why); nothing was written."""


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
    ``git_dir``; the number of objects written (of commits, from a local forge).
    ``NeedsGit`` when git must do it."""
    if not wants:
        return 0
    where = safe(display_url)
    body = request(wants, haves)
    if url.startswith("file://") and not config:
        forge = Path(urllib.parse.unquote(url[len("file://") :]))
        copied = _copy_locally(forge, git_dir, wants)
        if copied is not None:
            return copied
        answer = _upload_locally(forge, body)
    elif url.startswith(("http://", "https://")):
        headers = extra_headers(url, config)
        if headers is None or not speaks_fetch(url):
            raise NeedsGit("not a forge this module fetches from")
        answer = _post(url.rstrip("/"), body, headers=headers, where=where)
    else:
        raise NeedsGit("not a forge this module fetches from")
    try:
        objects = read_pack(pack_of(answer, where), where)
    except TooLarge as large:
        raise NeedsGit(str(large)) from None
    return store(git_dir, objects, wants=wants, where=where)


def request(wants: Sequence[str], haves: Sequence[str]) -> bytes:
    """A v2 ``fetch`` that asks for ``wants``, offers every one of ``haves`` and is done."""
    from assay import __version__

    lines = [b"command=fetch\n", f"agent=assay/{__version__}\n".encode()]
    body = b"".join(pkt_line(line) for line in lines) + b"0001"
    args = [b"no-progress\n", b"ofs-delta\n"]
    args += [f"want {sha}\n".encode() for sha in dict.fromkeys(wants)]
    args += [f"have {sha}\n".encode() for sha in dict.fromkeys(haves)]
    return body + b"".join(pkt_line(line) for line in [*args, b"done\n"]) + b"0000"


def _copy_locally(forge: Path, git_dir: Path, wants: Sequence[str]) -> int | None:
    """The commits ``wants`` copied from a local forge's objects into ``git_dir`` with what
    they reach (:func:`assay.odb.copy_objects`: contents first, each object hashed afresh,
    as a pack read here is written), starting no ``upload-pack``; the number of commits
    copied. None when the copy cannot bring them all (a long history, an object the forge
    lacks, a want that is no commit): upload-pack is asked then."""
    import pygit2

    from assay.odb import copy_objects, is_commit

    try:
        copied = copy_objects(forge, git_dir, wants)
    except (pygit2.GitError, KeyError, ValueError, OSError):
        return None
    return copied if all(is_commit(git_dir, sha) for sha in wants) else None


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


# ---------------------------------------------------------------------------- storing


def store(
    git_dir: Path, objects: Mapping[str, PackObject], *, wants: Sequence[str], where: str
) -> int:
    """Write ``objects`` into ``git_dir`` contents first, once the set is known complete."""
    from assay.odb import repository

    repo = repository(git_dir)
    gap = first_gap(repo, objects, where)
    if gap is not None:
        sha, name = gap
        raise ForgeUnavailable(
            f"{where}: the pack is incomplete: {objects[sha].kind} {sha} names {name}, "
            "which neither the pack nor the cache holds"
        )
    for sha in wants:
        wanted = objects.get(sha)
        if (wanted is None or wanted.kind != "commit") and not _is_commit(repo, sha):
            raise ForgeUnavailable(f"{where}: the pack does not hold the commit {sha} asked for")
    return write_contents_first(repo, objects, where)


def _is_commit(repo: Any, sha: str) -> bool:
    try:
        return bool(repo[sha].type_str == "commit")
    except (KeyError, ValueError):
        return False
