"""The forge's refs read in process: "did anything move?" without starting git.

Most reads of a forge find nothing new (a drain point between model calls, a desk's idle
poll, a woken run's view of refs it fetched a moment ago), yet a ``git fetch`` over smart
HTTP is four processes whatever it finds. This module answers the question in the calling
process, so the fetch is started only for refs whose tips the cache does not hold:

- an ``http(s)://`` forge is asked with git's own wire protocol, version 2: ``GET
  info/refs`` with ``Git-Protocol: version=2`` (the capability advertisement), then ``POST
  git-upload-pack`` with ``command=ls-refs`` and one ``ref-prefix`` argument per namespace,
  pkt-line framed (gitprotocol-v2(5), gitprotocol-http(5)). A server that answers version 0
  instead sends every ref in its advertisement, which is read as the answer. Any server
  that speaks git's smart HTTP works: ``git http-backend`` and Assay's own.
- a local (``file://`` or path) forge is read with libgit2 (:mod:`assay.odb`).

Credentials reach httpx exactly as git gets them: ``http.extraHeader`` settings of the
forge's git config (scoped to the forge's URL or not), and a URL's user info as Basic
auth. Nothing is logged and no error message holds them. A forge with any other git
setting (a proxy, a CA file, a credential helper) is not read here: :func:`remote_refs`
returns None and the caller fetches with git, which understands them.

A server that answers but not as git does (an HTTP error, a wrong content type, a malformed
or truncated pkt-line) is :class:`~assay.errors.ForgeUnavailable` naming the forge's URL.
A server that cannot be reached at all is :class:`Unreachable` (a ``ForgeUnavailable``),
which callers treat as "ask git": its fetch has the retry policy and the stall timeouts.
"""

from __future__ import annotations

import atexit
import os
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from assay.errors import Denied, ForgeUnavailable
from assay.forge.smarthttp import DELIM, FLUSH, pkt_line

if TYPE_CHECKING:
    import httpx

ADVERTISEMENT = "application/x-git-upload-pack-advertisement"
RESULT = "application/x-git-upload-pack-result"
REQUEST = "application/x-git-upload-pack-request"
MAX_ANSWER = 64 * 1024 * 1024  # bytes of one ls-refs answer: more is a hostile server
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0
_END = b"0002"  # response-end (protocol v2)
_HEX = frozenset("0123456789abcdef")
# (pid, https?) -> client: a forked child never reuses one, and a plain-HTTP forge's client
# never talks TLS
_CLIENTS: dict[tuple[int, bool], httpx.Client] = {}
_CLIENTS_LOCK = threading.Lock()
_SPEAKS_V2: set[str] = set()  # forge URLs whose advertisement offered ls-refs (v2)
_FETCHES: set[str] = set()  # ... and the v2 fetch command (assay.forge.fetchpack)


class Unreachable(ForgeUnavailable):
    """The forge could not be reached (connection refused, reset, timed out)."""


def remote_refs(
    url: str,
    prefixes: Sequence[str],
    *,
    config: Mapping[str, str],
    display_url: str,
) -> dict[str, str] | None:
    """``{ref: sha}`` of the forge's refs starting with any of ``prefixes``, read in process.

    None when this forge is not one this module reads (another scheme, or git settings
    only git understands); the caller then asks git.
    """
    if url.startswith("file://"):
        return _local_refs(Path(urllib.parse.unquote(url[len("file://") :])), prefixes)
    if not url.startswith(("http://", "https://")):
        return None
    headers = extra_headers(url, config)
    if headers is None:
        return None
    return http_ls_refs(url, prefixes, headers=headers, display_url=safe_url(display_url))


def safe_url(url: str) -> str:
    """``url`` without user info (a password there must never reach a message)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def extra_headers(url: str, config: Mapping[str, str]) -> dict[str, str] | None:
    """The HTTP headers git would send to ``url`` for ``config``; None when a setting is
    one this module does not reproduce (only ``http[.<url>].extraHeader`` is)."""
    headers: dict[str, str] = {}
    for key, value in config.items():
        section, _, rest = key.partition(".")
        scope, _, name = rest.rpartition(".")
        if section.lower() != "http" or name.lower() != "extraheader":
            return None
        if scope and not _url_matches(scope, url):
            continue
        field, colon, content = value.partition(":")
        if not colon or not field.strip():
            return None  # git would refuse it too; let git say so
        headers[field.strip()] = content.strip()
    return headers


def _url_matches(scope: str, url: str) -> bool:
    # git's http.<url>.* rule, as Assay writes it: scheme and host equal, path a prefix.
    want, have = urllib.parse.urlsplit(scope), urllib.parse.urlsplit(url)
    return (
        want.scheme == have.scheme
        and want.hostname == have.hostname
        and want.port == have.port
        and have.path.startswith(want.path.rstrip("/"))
    )


def _local_refs(path: Path, prefixes: Sequence[str]) -> dict[str, str] | None:
    import pygit2

    from assay.odb import repository

    try:
        repo = repository(path)
        found: dict[str, str] = {}
        for name in repo.references:
            if not name.startswith(tuple(prefixes)):
                continue
            target = repo.references[name].resolve().target
            if isinstance(target, pygit2.Oid):
                found[name] = str(target)
        return found
    except (pygit2.GitError, KeyError, ValueError, OSError):
        return None  # a ref moved while it was read, or no repository: ask git


@atexit.register
def _close_clients() -> None:
    with _CLIENTS_LOCK:
        mine = [key for key in _CLIENTS if key[0] == os.getpid()]
        clients = [_CLIENTS.pop(key) for key in mine]
    for client in clients:
        client.close()


def forget_servers() -> None:
    """Forget which forges were seen to speak v2 (the next ask reads the advertisement)."""
    _SPEAKS_V2.clear()
    _FETCHES.clear()


def client(url: str) -> httpx.Client:
    """This process's httpx client for requests to ``url`` (connections are reused; a forked
    child makes its own).

    An ``https://`` forge gets a client that verifies certificates. A plain ``http://``
    forge gets one that loads no CA bundle: reading it costs about 50 ms of CPU, paid by
    every process (16 contenders for a claim paid it 16 times), and a client handed only
    ``http://`` URLs (it is picked by the URL asked for; redirects are not followed) never
    negotiates TLS, so there is nothing to verify.
    """
    import httpx

    secure = url.startswith("https://")
    if not secure and not url.startswith("http://"):
        raise ValueError(f"not an HTTP URL: {safe_url(url)}")
    key = (os.getpid(), secure)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
            client = _CLIENTS[key] = httpx.Client(
                timeout=timeout, follow_redirects=False, trust_env=False, verify=secure
            )
        return client


def http_ls_refs(
    url: str, prefixes: Sequence[str], *, headers: Mapping[str, str], display_url: str
) -> dict[str, str]:
    """Ask a smart-HTTP forge for its refs under ``prefixes`` (protocol v2 ``ls-refs``)."""
    import httpx

    base = url.rstrip("/")
    common = {**headers, "Git-Protocol": "version=2"}
    try:
        if base not in _SPEAKS_V2:
            found = _advertised(base, prefixes, headers=common, display_url=display_url)
            if found is not None:
                return found
        body = pkt_line(b"command=ls-refs\n") + DELIM
        body += b"".join(pkt_line(f"ref-prefix {prefix}\n".encode()) for prefix in prefixes)
        answer = _request(
            "POST",
            f"{base}/git-upload-pack",
            headers={**common, "Content-Type": REQUEST, "Accept": RESULT},
            kind=RESULT,
            display_url=display_url,
            content=body + FLUSH,
        )
    except httpx.TransportError as exc:
        what = type(exc).__name__
        raise Unreachable(f"{display_url}: the forge did not answer ({what})") from None
    return _ref_lines(answer, prefixes, display_url=display_url)


def _advertised(
    base: str, prefixes: Sequence[str], *, headers: Mapping[str, str], display_url: str
) -> dict[str, str] | None:
    """The capability advertisement: None when the forge speaks v2 with ls-refs (noted, so
    later asks of this process go straight to the POST: the protocol is stateless), else the
    refs of its version-0 advertisement."""
    lines = _request(
        "GET",
        f"{base}/info/refs?service=git-upload-pack",
        headers=headers,
        kind=ADVERTISEMENT,
        display_url=display_url,
    )
    first = lines[0] if lines else None
    if first is not None and first.startswith(b"# service="):
        lines = lines[2:]  # the v0-style service banner and its flush
    if lines[:1] != [b"version 2\n"]:
        return _v0_refs(lines, prefixes, display_url=display_url)
    offered = {x.split(b"=")[0].strip() for x in lines if x is not None}
    if b"ls-refs" not in offered:
        raise ForgeUnavailable(f"{display_url}: the forge does not offer ls-refs")
    _SPEAKS_V2.add(base)
    if b"fetch" in offered:
        _FETCHES.add(base)
    return None


def speaks_fetch(url: str) -> bool:
    """Whether the forge at ``url`` offered protocol v2's ``fetch`` when this process read
    its advertisement (every :func:`remote_refs` over HTTP reads it first)."""
    return url.rstrip("/") in _FETCHES


def _request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    kind: str,
    display_url: str,
    content: bytes | None = None,
) -> list[bytes | None]:
    with client(url).stream(method, url, headers=headers, content=content) as reply:
        raw = read_reply(reply, kind=kind, limit=MAX_ANSWER, where=display_url)
    return parse_pkt_lines(raw, display_url=display_url)


def read_reply(reply: httpx.Response, *, kind: str, limit: int, where: str) -> bytes:
    """The body of a smart-HTTP reply (status 200, content type ``kind``), read up to
    ``limit`` bytes; ``ForgeUnavailable`` naming ``where`` for anything else. The one check
    of a git forge's HTTP answer: ls-refs and the in-process push both read through it."""
    if reply.status_code == 401:
        from assay.forge.http import UNAUTHORIZED

        raise Denied(f"{where}: {UNAUTHORIZED}")
    if reply.status_code != 200:
        raise ForgeUnavailable(f"{where}: the forge answered HTTP {reply.status_code}")
    got = reply.headers.get("Content-Type", "").split(";")[0].strip()
    if got != kind:
        raise ForgeUnavailable(f"{where}: not a git forge (content type {got[:60]!r})")
    raw = bytearray()
    for chunk in reply.iter_bytes():
        raw += chunk
        if len(raw) > limit:
            raise ForgeUnavailable(f"{where}: the answer is over {limit} bytes")
    return bytes(raw)


def parse_pkt_lines(raw: bytes, *, display_url: str) -> list[bytes | None]:
    """Split a pkt-line stream: payloads, None for each flush/delim/end packet.

    The stream must end with a flush (or response-end) packet: anything cut short is
    ``ForgeUnavailable`` (an answer truncated by a dying server is never read as complete).
    """
    lines: list[bytes | None] = []
    at = 0
    while at < len(raw):
        head = raw[at : at + 4]
        if len(head) < 4 or not set(head.decode("latin-1").lower()) <= _HEX:
            raise ForgeUnavailable(f"{display_url}: malformed pkt-line at byte {at}")
        size = int(head, 16)
        if head in (FLUSH, DELIM, _END):
            lines.append(None)
            at += 4
            continue
        if size < 4 or at + size > len(raw):
            raise ForgeUnavailable(f"{display_url}: truncated or malformed pkt-line at byte {at}")
        lines.append(raw[at + 4 : at + size])
        at += size
    if not lines or lines[-1] is not None:
        raise ForgeUnavailable(f"{display_url}: the answer ended without a flush packet")
    return lines


def _ref_lines(
    lines: list[bytes | None], prefixes: Sequence[str], *, display_url: str
) -> dict[str, str]:
    """The ``<oid> <ref>[ <attribute>...]`` lines of an ls-refs answer."""
    if None in lines[:-1]:
        raise ForgeUnavailable(f"{display_url}: unexpected packet inside the ls-refs answer")
    found: dict[str, str] = {}
    for line in lines[:-1]:
        assert line is not None
        parts = line.rstrip(b"\n").decode("utf-8", "replace").split(" ")
        _add_ref(found, parts[0], parts[1] if len(parts) > 1 else "", display_url)
    return {ref: sha for ref, sha in found.items() if ref.startswith(tuple(prefixes))}


def _v0_refs(
    lines: list[bytes | None], prefixes: Sequence[str], *, display_url: str
) -> dict[str, str]:
    """A version-0 advertisement: ``<oid> <ref>`` lines (capabilities after a NUL)."""
    found: dict[str, str] = {}
    for line in lines[:-1]:
        if line is None:
            raise ForgeUnavailable(f"{display_url}: unexpected packet in the advertisement")
        text = line.split(b"\0")[0].rstrip(b"\n").decode("utf-8", "replace")
        sha, _, ref = text.partition(" ")
        if ref == "capabilities^{}" or ref.endswith("^{}"):
            continue  # an empty repository's placeholder, or a peeled tag
        _add_ref(found, sha, ref, display_url)
    return {ref: sha for ref, sha in found.items() if ref.startswith(tuple(prefixes))}


def _add_ref(found: dict[str, str], sha: str, ref: str, display_url: str) -> None:
    if len(sha) != 40 or not set(sha) <= _HEX or not ref or ".." in ref:
        raise ForgeUnavailable(f"{display_url}: malformed ref line in the forge's answer")
    if ref.startswith("refs/"):  # HEAD (a version-0 advertisement lists it) is not asked for
        found[ref] = sha
