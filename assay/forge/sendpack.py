"""git's send-pack side of a push, in process: one POST per compare-and-swap push.

``git push`` over smart HTTP starts four processes (``git``, ``git-remote-http``,
``send-pack``, ``pack-objects``) and makes two requests: ``GET info/refs`` to learn the refs,
then ``POST git-receive-pack``. The receive-pack side is stateless (gitprotocol-http(5)), and
the commands carry the old value the server must find under its ref lock
(gitprotocol-pack(5)), so a push whose every update is a CAS with a known expected value needs
no advertisement: this module sends the commands ``<old> <new> <ref>`` and a pack of what the
forge lacks in one request and reads receive-pack's report. The server's check is git's
``--force-with-lease``, made under the lock instead of against an advertisement. A local
(``file://``) forge's answer to the same request is taken in this process
(:func:`assay.forge.receivepack.take_locally`), or else by its own ``git receive-pack
--stateless-rpc`` started directly with the request on its stdin: no process, or one where
``git push`` starts four; the forge's hooks run either way.

The pack holds the objects reachable from each new tip that the forge is not known to hold:
the expected old values and the caller's ``hidden`` tips (what it last fetched) are on the
forge with their whole history. For each commit not reachable from those, the commit and the
tree entries that differ from its parents' same-path entries are sent, parents first (a
same-path entry the parent has is on the forge, or was sent with the parent:
:func:`pack_reachable`). Objects go whole (no deltas): a
step's pack is a few small objects, and libgit2's pack builder cannot be told what to leave
out.

What this module does not do it hands back as :class:`NeedsGit` (the caller pushes with
``git push``): an unconditional update or a delete (git reads the advertisement first; a
delete whose old object the server lacks would be made unconditionally), a forge the report
says lacks objects (a hidden tip was pruned), an atomic push whose refusal cannot be read
without the refs' current values, and a walk too long to be a step.

Credentials travel only in request headers (``http[.<url>].extraHeader``, as
:mod:`assay.forge.lsrefs` reads them); every message names the forge by its safe URL. A server
that answers but not as receive-pack does is ``ForgeUnavailable``; a report line for a ref
that was not sent, a missing one, or an "ok" inside a failed atomic push is never believed.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.errors import ForgeUnavailable
from assay.forge import receivepack
from assay.forge.lsrefs import (
    CONNECT_TIMEOUT_S,
    client,
    extra_headers,
    parse_pkt_lines,
    read_reply,
)
from assay.forge.lsrefs import safe_url as safe
from assay.forge.smarthttp import pkt_line
from assay.plumbing import (
    STALL_S,
    UNCHECKED,
    ZERO_SHA,
    PushGate,
    PushOutcome,
    PushResult,
    PushThrottled,
    RefUpdate,
    RetryPolicy,
    TransportError,
    classify_line,
    failure,
    git_env,
    overall_outcome,
    retry_after_seconds,
    run_git,
    send_now,
    with_retries,
)

if TYPE_CHECKING:
    import pygit2

REQUEST = "application/x-git-receive-pack-request"
RESULT = "application/x-git-receive-pack-result"
MAX_REPORT = 4 * 1024 * 1024  # bytes of one report (hook output included): more is hostile
MAX_COMMITS = 1000  # new commits in one push; more means the forge's view is unknown: ask git
_STALE = "[rejected] (stale info)"  # git's words when the ref is not at the lease's value
_LOCK = re.compile(r"cannot lock ref '([^']+)': (.*)")
_IS_AT = re.compile(r"is at ([0-9a-f]{40}) but expected ([0-9a-f]{40})")
_SPACE = ("no space left on device", "disk quota exceeded")


class NeedsGit(Exception):
    """This push is one for ``git push`` (the reason says why); nothing was changed."""


@dataclass(frozen=True)
class Report:
    """What receive-pack said: its unpack status, one status per ref, the error text."""

    unpack: str
    statuses: dict[str, str]  # ref -> "ok" or the ng reason
    errors: list[str]


def push(
    url: str,
    git_dir: Path,
    updates: Sequence[RefUpdate],
    *,
    atomic: bool,
    config: Mapping[str, str],
    display_url: str,
    hidden: Callable[[], Iterable[str]] = tuple,
    policy: RetryPolicy | None = None,
    gate: PushGate = send_now,
) -> PushResult | None:
    """Push CAS ``updates`` of commits in ``git_dir`` in process; None when this is not a
    push this module makes (the caller runs git). ``hidden()`` lists commits the forge holds
    (asked only when the push is made here).

    Every request goes through ``gate`` (a forge's push budget). An HTTP 429 is
    ``PushThrottled`` (nothing moved), which the gate may send again.

    Raises :class:`NeedsGit` when the forge's answer needs git's own push.
    """
    if not updates or any(u.expected is UNCHECKED or u.new is None for u in updates):
        return None
    where = safe(display_url)
    send = transport(url, config, where)
    if send is None:
        return None
    known = {str(u.expected) for u in updates if u.expected is not None}
    # A ref asserted where it is (new == expected) needs no object: its tip may be one this
    # cache only listed (a desk's view reads other briefs' branch tips, not their trees).
    moved = [str(u.new) for u in updates if u.new != u.expected]
    data = build_pack(git_dir, moved, hidden=[*known, *hidden()])
    body = commands(updates, atomic=atomic) + data
    tries = 0

    def attempt() -> PushResult:
        nonlocal tries
        tries += 1
        report = parse_report(gate(lambda: send.request(body)), where)
        return judge(
            updates,
            report,
            atomic=atomic,
            git_dir=git_dir,
            where=where,
            retried=tries > 1,
            read_ref=send.read_ref,
        )

    return with_retries(f"push {where}", attempt, policy=policy)


# ---------------------------------------------------------------------------- request


def commands(updates: Sequence[RefUpdate], *, atomic: bool) -> bytes:
    """The command list: ``<old> <new> <ref>``, capabilities after a NUL on the first."""
    from assay import __version__

    caps = ["report-status", "side-band-64k", "quiet", f"agent=assay/{__version__}"]
    if atomic and len(updates) > 1:
        caps.insert(1, "atomic")
    lines = []
    for at, update in enumerate(updates):
        old = update.expected if isinstance(update.expected, str) else ZERO_SHA
        line = f"{old} {update.new or ZERO_SHA} {update.ref}"
        lines.append(pkt_line((line + ("\0" + " ".join(caps) if at == 0 else "") + "\n").encode()))
    return b"".join(lines) + b"0000"


@dataclass(frozen=True)
class Transport:
    """How a request reaches receive-pack (its answer returned), and, on a local forge,
    how one of its refs is read without asking it (None over HTTP: that is a round trip)."""

    request: Callable[[bytes], bytes]
    read_ref: Callable[[str], str | None] | None = None


def transport(url: str, config: Mapping[str, str], where: str) -> Transport | None:
    """None when git must push to this forge (another scheme, or settings only git
    understands)."""
    if url.startswith("file://") and not config:
        from assay.odb import read_ref

        path = Path(urllib.parse.unquote(url[len("file://") :]))
        return Transport(lambda body: _receive_locally(path, body), lambda r: read_ref(path, r))
    if not url.startswith(("http://", "https://")):
        return None
    headers = extra_headers(url, config)
    if headers is None:
        return None
    return Transport(lambda body: _post(url.rstrip("/"), body, headers=headers, where=where))


def _receive_locally(path: Path, body: bytes) -> bytes:
    """The local forge's answer: taken in this process as ``assay forge serve`` takes a
    plain push (:mod:`assay.forge.receivepack`), else by ``git receive-pack`` started
    directly with the request on its stdin. The forge's hooks run either way, without
    ``git push``, its shell, ``pack-objects`` and ``send-pack``."""
    answer = receivepack.take_locally(path, body, git_env())
    if answer is not None:
        return answer
    args = ["receive-pack", "--stateless-rpc", str(path)]
    done = run_git(args, input=body, check=False)
    if not done.stdout:
        raise failure(args, done)  # typed: no repository there, or a transport failure
    return done.stdout


def _post(base: str, body: bytes, *, headers: Mapping[str, str], where: str) -> bytes:
    import httpx

    try:  # git's GIT_HTTP_LOW_SPEED_TIME for the same forge (assay.plumbing.git_env)
        stall = float(os.environ.get("ASSAY_FORGE_STALL_SECONDS", str(STALL_S)))
    except ValueError:
        stall = float(STALL_S)
    request_headers = {**headers, "Content-Type": REQUEST, "Accept": RESULT}
    timeout = httpx.Timeout(stall, connect=CONNECT_TIMEOUT_S)
    try:
        with client(base).stream(
            "POST",
            f"{base}/git-receive-pack",
            headers=request_headers,
            content=body,
            timeout=timeout,
        ) as reply:
            return _read_reply(reply, where)
    except httpx.TransportError as exc:
        # The push may have landed: the retry's report says so (the ref is at our value).
        raise TransportError(f"push {where}: no answer ({type(exc).__name__})") from None


def _read_reply(reply: Any, where: str) -> bytes:
    if reply.status_code >= 500:  # a server that failed, not one that refused: retried
        raise TransportError(f"push {where}: the forge answered HTTP {reply.status_code}")
    if reply.status_code == 429:  # over the forge's push rate: nothing moved
        said = _printable(reply.read()[:300].decode("utf-8", "replace")).strip()
        raise PushThrottled(
            f"push {where}: the forge refused the push over its rate: {said or 'HTTP 429'}",
            retry_after=retry_after_seconds(reply.headers.get("Retry-After")),
        )
    return read_reply(reply, kind=RESULT, limit=MAX_REPORT, where=where)


# ---------------------------------------------------------------------------- report


def parse_report(raw: bytes, where: str) -> Report:
    """Demultiplex side-band-64k (1: the report, 2: messages, 3: a fatal error) and read
    report-status: ``unpack <status>``, then ``ok <ref>`` / ``ng <ref> <reason>``, flush."""
    data, text = b"", b""
    for packet in _packets(raw, where)[:-1]:
        if packet is None or not packet:
            raise ForgeUnavailable(f"{where}: unexpected packet in the push's answer")
        channel, payload = packet[0], packet[1:]
        if channel == 1:
            data += payload
        elif channel == 2:
            text += payload
        elif channel == 3:
            said = _printable(payload.decode("utf-8", "replace"))
            raise ForgeUnavailable(f"{where}: the forge failed the push: {said}")
        else:
            raise ForgeUnavailable(f"{where}: unknown side-band channel {channel}")
    lines = parse_pkt_lines(data, display_url=where) if data else []
    if not lines or lines[0] is None or not lines[0].startswith(b"unpack "):
        raise ForgeUnavailable(f"{where}: the push's answer has no report")
    if None in lines[:-1]:
        raise ForgeUnavailable(f"{where}: unexpected packet inside the push's report")
    statuses: dict[str, str] = {}
    for line in lines[1:-1]:
        assert line is not None
        word, _, rest = line.decode("utf-8", "replace").rstrip("\n").partition(" ")
        ref, _, reason = rest.partition(" ")
        if word not in ("ok", "ng") or not ref or ref in statuses:
            raise ForgeUnavailable(f"{where}: malformed status line in the push's report")
        statuses[ref] = "ok" if word == "ok" else (reason or "rejected")
    unpack = lines[0][len(b"unpack ") :].decode("utf-8", "replace").strip()
    errors = [_printable(x) for x in text.decode("utf-8", "replace").splitlines() if x.strip()]
    return Report(unpack=unpack, statuses=statuses, errors=errors)


def _packets(raw: bytes, where: str) -> list[bytes | None]:
    """The answer's packets. One cut short at a packet's end is a transport failure, never a
    report: a server killed while its post-receive hook ran has sent receive-pack's report
    but not the closing flush, so the push may have landed, and the retry's report (the ref
    at our value: up to date) says whether it did."""
    try:
        return parse_pkt_lines(raw, display_url=where)
    except ForgeUnavailable:
        try:
            parse_pkt_lines(raw + b"0000", display_url=where)
        except ForgeUnavailable:
            pass
        else:
            raise TransportError(f"push {where}: the answer was cut short") from None
        raise


def judge(
    updates: Sequence[RefUpdate],
    report: Report,
    *,
    atomic: bool,
    git_dir: Path,
    where: str,
    retried: bool = False,
    read_ref: Callable[[str], str | None] | None = None,
) -> PushResult:
    """The typed outcome of each ref from receive-pack's report, in git's words."""
    if report.unpack != "ok":
        if any(p in report.unpack.lower() for p in _SPACE):
            raise TransportError(f"push {where}: the forge cannot store the push")
        raise NeedsGit(f"the forge could not unpack the pack ({report.unpack[:80]})")
    sent = {u.ref for u in updates}
    if set(report.statuses) != sent:
        raise ForgeUnavailable(f"{where}: the push's report names other refs than were pushed")
    locks = _lock_errors(report.errors)
    failed = any(s != "ok" for s in report.statuses.values())
    # An atomic push moves every ref or none: an "ok" beside a refusal is not believed.
    all_or_none = atomic and len(updates) > 1 and failed
    per_ref: dict[str, PushOutcome] = {}
    summaries: dict[str, str] = {}
    for update in updates:
        status = report.statuses[update.ref]
        if status == "ok" and not all_or_none:
            flag, summary = _accepted(update, git_dir)
        elif status == "ok":
            flag, summary = "!", "[rejected] (atomic push failed)"
        else:
            lock = locks.get(update.ref)
            flag, summary = _refused(update, status, lock, retried=retried, read_ref=read_ref)
        if flag == "=" and all_or_none:
            raise NeedsGit("an atomic push found a ref already at its new value")
        per_ref[update.ref] = classify_line(flag, summary)
        summaries[update.ref] = summary
    detail = "; ".join(f"{ref}: {summary}" for ref, summary in summaries.items())
    return PushResult(outcome=overall_outcome(per_ref), refs=per_ref, detail=detail)


def _accepted(update: RefUpdate, git_dir: Path) -> tuple[str, str]:
    """git's porcelain flag and summary for a ref the server moved."""
    if update.expected is None:
        return "*", "[new reference]"
    if update.expected == update.new:
        return "=", "[up to date]"
    if _descends(git_dir, str(update.new), str(update.expected)):
        return " ", f"{str(update.expected)[:7]}..{str(update.new)[:7]}"
    return "+", f"{str(update.expected)[:7]}...{str(update.new)[:7]} (forced update)"


def _refused(
    update: RefUpdate,
    status: str,
    lock: str | None,
    *,
    retried: bool,
    read_ref: Callable[[str], str | None] | None,
) -> tuple[str, str]:
    """git's flag and summary for a ref the server refused, from its reason and the
    "cannot lock ref" message that named the ref."""
    if status == "missing necessary objects":
        raise NeedsGit("the forge lacks objects the pack left out")
    if lock is not None and status in ("failed to update ref", "atomic transaction failed"):
        moved = _IS_AT.search(lock)
        if moved is not None and moved.group(1) == update.new:
            # A retry whose first attempt landed finds the ref at our value: the push is
            # ours, as git (which reads the refs first) reports it: up to date.
            return "=", "[up to date]"
        if moved is not None or "unable to resolve reference" in lock:
            return "!", _STALE  # the ref was not at the lease's value when the push came
        if "reference already exists" in lock:
            if read_ref is not None:  # a local forge's ref is read, not asked for
                at_ours = read_ref(update.ref) == update.new
                return ("=", "[up to date]") if at_ours else ("!", _STALE)
            if retried:  # perhaps our own first attempt: git reads whose value it is
                raise NeedsGit("a retried create found the ref already there")
            return "!", _STALE
    return "!", f"[remote rejected] ({status[:200]})"


def _lock_errors(errors: Sequence[str]) -> dict[str, str]:
    """``{ref: reason}`` of receive-pack's "cannot lock ref" messages."""
    found: dict[str, str] = {}
    for line in errors:
        match = _LOCK.search(line)
        if match is not None:
            found.setdefault(match.group(1), match.group(2))
    return found


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text).strip()[:300]


def _descends(git_dir: Path, new: str, old: str) -> bool:
    import pygit2

    from assay.odb import repository

    try:
        return bool(repository(git_dir).descendant_of(new, old))
    except (KeyError, ValueError, pygit2.GitError):
        return False  # git, too, calls an update it cannot prove a fast-forward forced


# ---------------------------------------------------------------------------- pack


def build_pack(git_dir: Path, tips: Sequence[str], *, hidden: Iterable[str]) -> bytes:
    """A version-2 pack of the objects reachable from ``tips`` and not from ``hidden``."""
    from assay.odb import repository

    return pack_reachable(repository(git_dir), tips, hidden=hidden)


def pack_reachable(repo: pygit2.Repository, tips: Sequence[str], *, hidden: Iterable[str]) -> bytes:
    """:func:`build_pack` on a libgit2 handle: what a push sends, and what the forge server
    sends for a fetch (:mod:`assay.forge.uploadpack`). ``hidden`` are commits the other side
    holds with their whole history. ``NeedsGit`` past :data:`MAX_COMMITS`."""
    return write_pack(repo, reachable_objects(repo, tips, hidden=hidden))


def reachable_objects(
    repo: pygit2.Repository, tips: Sequence[str], *, hidden: Iterable[str]
) -> dict[Any, None]:
    """The ids of the objects :func:`pack_reachable` packs, in pack order (a group push
    takes them from several repositories into one pack: :func:`pack_objects`).

    Each commit to send goes with the entries of its tree that differ from the same path in
    its parents' trees. That is only sound when each parent is either held (hidden, or an
    ancestor of a hidden commit: the other side has its tree whole) or was taken first, so
    that all its tree names is already in the pack or held: commits are taken parents
    first (:func:`_parents_first`). In the walk's own order a tree two commits share (a
    branch that puts its base's tree back) could be reached from the later commit first,
    and an entry left to the parent while the parent left it to that tree was sent by
    neither (a fresh clone of such a forge failed)."""
    import pygit2

    walker = repo.walk(None, pygit2.enums.SortMode.NONE)
    try:
        for tip in tips:
            walker.push(pygit2.Oid(hex=tip))
    except (KeyError, ValueError, pygit2.GitError):
        raise NeedsGit("a commit to push is not in the repository") from None
    for sha in hidden:
        try:
            walker.hide(pygit2.Oid(hex=sha))
        except (KeyError, ValueError, pygit2.GitError):
            continue  # not here, so not an ancestor of anything we send
    commits = []
    for count, commit in enumerate(walker):
        if count >= MAX_COMMITS:
            raise NeedsGit(f"over {MAX_COMMITS} commits to send: git negotiates what to send")
        commits.append(commit)
    ordered = _parents_first(commits)
    objects: dict[pygit2.Oid, None] = dict.fromkeys(commit.id for commit in ordered)
    for commit in ordered:
        _add_tree(repo, commit.tree_id, [p.tree_id for p in commit.parents], objects)
    return objects


def _parents_first(commits: Sequence[Any]) -> list[Any]:
    """``commits`` (pygit2 commits) ordered so that each comes after those of its parents
    that are among them."""
    by_id = {commit.id: commit for commit in commits}
    placed: set[Any] = set()
    ordered: list[Any] = []
    for start in commits:
        stack = [(start, False)]
        while stack:
            commit, parents_done = stack.pop()
            if commit.id in placed:
                continue
            if parents_done:
                placed.add(commit.id)
                ordered.append(commit)
                continue
            stack.append((commit, True))
            stack.extend(
                (by_id[pid], False)
                for pid in commit.parent_ids
                if pid in by_id and pid not in placed
            )
    return ordered


def _add_tree(
    repo: pygit2.Repository, tree_id: pygit2.Oid, bases: list[pygit2.Oid], into: dict[Any, None]
) -> None:
    """Add a tree and its entries that differ from the same paths in ``bases`` (trees all of
    whose objects the other side holds or ``into`` has: an added tree is added whole)."""
    if tree_id in into or tree_id in bases:
        return
    into[tree_id] = None
    trees: list[Any] = [repo[b] for b in bases]  # pygit2.Tree (its stubs say Object)
    base_entries = [{e.name: e for e in tree} for tree in trees]
    tree: Any = repo[tree_id]
    for entry in tree:
        same = [found for names in base_entries if (found := names.get(entry.name)) is not None]
        if entry.id in into or any(s.id == entry.id for s in same):
            continue
        if entry.type_str == "tree":
            _add_tree(repo, entry.id, [s.id for s in same if s.type_str == "tree"], into)
        elif entry.type_str == "blob":
            into[entry.id] = None
        # a gitlink (submodule commit) is not an object of this repository


def write_pack(repo: pygit2.Repository, objects: Iterable[Any]) -> bytes:
    """Whole objects of ``repo`` in pack format 2 (:func:`pack_objects`)."""
    return pack_objects([repo.odb.read(oid) for oid in objects])


def pack_objects(objects: Sequence[tuple[int, bytes]]) -> bytes:
    """``(type, content)`` pairs as whole objects in pack format 2: header, each
    ``type+size`` varint and zlib body, then the SHA-1 of everything before it (libgit2's
    object types are the pack's 1 to 4)."""
    parts = [b"PACK", (2).to_bytes(4, "big"), len(objects).to_bytes(4, "big")]
    for kind, raw in objects:
        parts.append(_object_header(int(kind), len(raw)))
        parts.append(zlib.compress(raw, 1))
    body = b"".join(parts)
    return body + hashlib.sha1(body).digest()


def _object_header(kind: int, size: int) -> bytes:
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)
