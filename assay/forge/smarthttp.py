"""Git's smart-HTTP protocol, the parts a forge server can answer without starting git.

Every round trip over smart HTTP is two requests: a GET of ``info/refs`` (the ref
advertisement) and a POST. ``git http-backend`` answers both by starting ``upload-pack`` or
``receive-pack``; this module answers the reading half in process instead:

- the protocol v2 capability list of ``upload-pack`` (static for a given git and config),
- the v0 ref advertisement of ``receive-pack`` (the refs, read by libgit2, and the
  capabilities that git itself advertised when the server started),
- protocol v2 ``ls-refs`` (``ref-prefix``, ``symrefs``, ``peel``, ``unborn``),
- ``receive-pack``'s refusal of a push whose commands are stale against the refs as they
  are (the lock errors and the report, in the framing the client asked for),

byte for byte as git 2.39 writes them, honouring ``transfer.hideRefs`` and the
service's own ``hideRefs``. Whatever needs git's object machinery (``fetch``, pushes, a v0
fetch's advertisement) is left to the caller, which starts the service directly.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import BadInput
from assay.plumbing import ZERO_SHA

FLUSH = b"0000"
DELIM = b"0001"
FLUSH_CODE = 0  # how pkt_lines() yields a flush packet
DELIM_CODE = 1  # and a delim packet
UPLOAD_PACK = "git-upload-pack"
RECEIVE_PACK = "git-receive-pack"
SERVICES = (UPLOAD_PACK, RECEIVE_PACK)
_LENGTH = re.compile(rb"[0-9a-f]{4}")


def pkt_line(payload: bytes) -> bytes:
    """One pkt-line: four hex digits of length (their own included), then the payload."""
    if len(payload) > 65516:
        raise BadInput(f"pkt-line: a payload of {len(payload)} bytes is over git's 65516")
    return b"%04x" % (len(payload) + 4) + payload


def service_line(service: str) -> bytes:
    """The ``# service=`` line and flush that smart HTTP puts before a v0/v1 advertisement."""
    return pkt_line(f"# service={service}\n".encode()) + FLUSH


def pkt_lines(data: bytes) -> Iterator[bytes | int]:
    """The packets of ``data``: payloads as bytes, flush/delim/response-end as 0/1/2."""
    pos = 0
    while pos < len(data):
        head = data[pos : pos + 4]
        if not _LENGTH.fullmatch(head):
            raise BadInput(f"pkt-line at byte {pos}: {head!r} is not a four-digit hex length")
        size = int(head, 16)
        if size < 4:
            if size == 3:
                raise BadInput(f"pkt-line at byte {pos}: length 0003 is invalid")
            yield size
            pos += 4
            continue
        if pos + size > len(data):
            raise BadInput(f"pkt-line at byte {pos}: length {size} runs past the body's end")
        yield data[pos + 4 : pos + size]
        pos += size


@dataclass(frozen=True)
class Command:
    """A protocol v2 request: ``command=<name>``, its capabilities and arguments."""

    name: str
    capabilities: tuple[str, ...]
    arguments: tuple[str, ...]


def _text(payload: bytes) -> str:
    try:
        return payload.decode("utf-8").removesuffix("\n")
    except UnicodeDecodeError:
        raise BadInput(f"protocol v2 request: {payload[:40]!r} is not UTF-8") from None


def parse_command(data: bytes) -> Command:
    """Parse one v2 request: capability lines, a delim, argument lines, a flush."""
    packets = list(pkt_lines(data))
    if FLUSH_CODE not in packets:
        raise BadInput("protocol v2 request: no flush packet ends it")
    end = packets.index(FLUSH_CODE)
    if any(p != FLUSH_CODE for p in packets[end + 1 :]):
        raise BadInput("protocol v2 request: data after the flush packet")
    head, args = packets[:end], []
    if DELIM_CODE in head:
        split = head.index(DELIM_CODE)
        head, args = head[:split], head[split + 1 :]
    if any(isinstance(p, int) for p in (*head, *args)):
        raise BadInput("protocol v2 request: an unexpected special packet")
    lines = [_text(p) for p in head if isinstance(p, bytes)]
    names = [line.removeprefix("command=") for line in lines if line.startswith("command=")]
    if len(names) != 1 or not names[0]:
        raise BadInput("protocol v2 request: it must name exactly one command=")
    capabilities = tuple(line for line in lines if not line.startswith("command="))
    return Command(names[0], capabilities, tuple(_text(p) for p in args if isinstance(p, bytes)))


def command_name(first_packet: bytes) -> str | None:
    """The command a v2 request body starts with (None when it starts otherwise)."""
    packets = pkt_lines(first_packet)
    try:
        packet = next(packets)
    except (StopIteration, BadInput):
        return None
    if not isinstance(packet, bytes) or not packet.startswith(b"command="):
        return None
    return packet[len(b"command=") :].decode("utf-8", "replace").strip()


def protocol_version(header: str) -> int:
    """The protocol version a ``Git-Protocol`` header asks for (git takes the highest)."""
    version = 0
    for item in header.split(":"):
        key, _, value = item.partition("=")
        if key == "version" and value.isdigit():
            version = max(version, int(value))
    return version


def service_env(*, remote_addr: str, git_protocol: str) -> dict[str, str]:
    """The environment ``git http-backend`` gives the service it starts.

    No ``HOME`` and no system config, so only the forge's own config rules; the committer
    identity of reflog entries is the one http-backend derives from ``REMOTE_USER``.
    """
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PROTOCOL": git_protocol,
        "REMOTE_ADDR": remote_addr,
        "REMOTE_USER": "assay",
        "GIT_COMMITTER_NAME": "assay",
        "GIT_COMMITTER_EMAIL": f"assay@http.{remote_addr or '(none)'}",
    }


def _hidden(name: str, patterns: Sequence[str]) -> bool:
    """git's ``ref_is_hidden``: the last matching pattern wins; ``!`` un-hides."""
    for pattern in reversed(patterns):
        negated = pattern.startswith("!")
        body = pattern[1:] if negated else pattern
        body = body.removeprefix("^")  # no namespaces here: full and stripped names agree
        if name.startswith(body) and (len(name) == len(body) or name[len(body)] == "/"):
            return not negated
    return False


def hide_patterns(config: Any, section: str) -> list[str]:
    """``transfer.hideRefs`` then ``<section>.hideRefs``, as git reads them."""
    patterns: list[str] = []
    for key in ("transfer.hiderefs", f"{section}.hiderefs"):
        patterns += [v.rstrip("/") for v in config.get_multivar(key)]
    return patterns


@dataclass(frozen=True)
class _Ref:
    name: str
    oid: str | None
    symref_target: str | None


ADVERTISED_KEPT = 1 << 16  # values :class:`RefServer` notes from ls-refs, at most


class RefServer:
    """Answers the reading requests of one repository in process.

    ``start()`` asks git once (two processes) for what it advertises, so the capability
    lines are git's own for this git and this config; afterwards no request starts one.
    """

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.upload_pack_v2 = b""
        self.receive_pack_caps: str | None = None
        self.tip_walks = 0  # fetches whose wants were looked for among every ref
        self._lock = threading.Lock()
        self._idle: list[Any] = []  # libgit2 handles no request is using
        self._advertised: dict[str, str] = {}  # a value ls-refs answered -> its ref's name

    def start(self) -> RefServer:
        env = service_env(remote_addr="", git_protocol="version=2")
        self.upload_pack_v2 = self._advertise("upload-pack", env)
        first = next(iter(pkt_lines(self._advertise("receive-pack", {**env, "GIT_PROTOCOL": ""}))))
        caps = first.partition(b"\0")[2].decode().strip() if isinstance(first, bytes) else ""
        # A push-cert nonce or a session id changes per request: leave those to git.
        if caps and "push-cert=" not in caps and "session-id=" not in caps:
            self.receive_pack_caps = caps
        return self

    def _advertise(self, service: str, env: Mapping[str, str]) -> bytes:
        done = subprocess.run(
            ["git", service, "--stateless-rpc", "--advertise-refs", "."],
            cwd=self.git_dir,
            env=dict(env),
            capture_output=True,
            check=False,
            timeout=60,
        )
        if done.returncode != 0:
            raise BadInput(f"forge serve {self.git_dir}: git {service} failed: {done.stderr!r}")
        return done.stdout

    def config(self) -> Any:
        """The forge's own config, read afresh (``pygit2.Config``)."""
        import pygit2

        return pygit2.Config(os.fspath(self.git_dir / "config"))

    def _refs(self, repo: Any, wanted: Callable[[str], bool]) -> list[_Ref]:
        """The refs under ``refs/`` that ``wanted`` keeps and that resolve to an object,
        sorted as git sorts (bytewise)."""
        found = []
        for ref in repo.references.iterator():  # Reference objects: no second look-up
            if ref.name.startswith("refs/") and wanted(ref.name):
                resolved = self._resolved(repo, ref)
                if resolved is not None and resolved.oid is not None:
                    found.append(resolved)
        return sorted(found, key=lambda ref: ref.name.encode())

    def _named(
        self, repo: Any, prefixes: set[str], wanted: Callable[[str], bool]
    ) -> list[_Ref] | None:
        """What :meth:`_refs` returns for refs under ``prefixes``, found by name
        (:func:`assay.odb.ref_names`) instead of by reading every ref: a desk reads one
        brief's ref at a time, and a forge of 500 briefs holds 2,500. None when a prefix
        ends in a folder (``refs/assay/claims/``: resolving hundreds of refs one by one is
        slower than libgit2's walk), is not a plain path, or there are too many of them."""
        from assay.odb import ref_names

        under = [prefix for prefix in prefixes if prefix.startswith("refs/")]
        if (
            not prefixes
            or len(under) > _NAMED_PREFIXES
            or any(prefix.endswith("/") or "refs/".startswith(prefix) for prefix in prefixes)
        ):
            return None  # a folder's refs are read faster by the walk than one by one
        names: set[str] = set()
        for prefix in under:
            found = ref_names(self.git_dir, prefix)
            if found is None:
                return None
            names |= found
        refs = [self._resolve(repo, name) for name in names if wanted(name)]
        kept = [ref for ref in refs if ref is not None and ref.oid is not None]
        return sorted(kept, key=lambda ref: ref.name.encode())

    @classmethod
    def _resolve(cls, repo: Any, name: str) -> _Ref | None:
        import pygit2

        try:
            ref = repo.references[name]
        except (KeyError, pygit2.GitError, ValueError):
            return None
        return cls._resolved(repo, ref)

    @classmethod
    def _value(cls, repo: Any, name: str) -> str | None:
        ref = cls._resolve(repo, name)
        return ref.oid if ref is not None else None

    @staticmethod
    def _resolved(repo: Any, ref: Any) -> _Ref | None:
        import pygit2

        name = ref.name
        try:
            if ref.type != pygit2.enums.ReferenceType.SYMBOLIC:
                oid = str(ref.target)
                return _Ref(name, oid, None) if oid in repo else None
            target = str(ref.target)
            try:
                resolved: str | None = str(ref.resolve().target)
            except (KeyError, pygit2.GitError):
                resolved = None  # a symref to a ref not born yet
            if resolved is not None and resolved not in repo:
                return None
            return _Ref(name, resolved, target)
        except (KeyError, pygit2.GitError, ValueError):
            return None

    @contextmanager
    def repository(self) -> Iterator[Any]:
        """A libgit2 handle of this request's own (handles are not thread-safe): one from
        the idle ones, or a new one, given back after. One handle behind a lock made every
        ref read wait for the one before it (a fleet's ls-refs queued on the server).
        libgit2 re-reads loose refs and ``packed-refs`` when they change."""
        import pygit2

        with self._lock:
            handle = self._idle.pop() if self._idle else None
        if handle is None:
            handle = pygit2.Repository(os.fspath(self.git_dir))
        try:
            yield handle
        finally:
            with self._lock:
                self._idle.append(handle)

    def may_serve(self, repo: Any, oids: Sequence[str]) -> bool:
        """Whether a fetch answered here may send each of ``oids``: a ref reaches it now.

        A client learns its wants from an ``ls-refs`` answer, so each is looked for first
        from the ref that answer named for it, as that ref is now: its value, or a
        descendant of it. A claim is renewed and a branch pushed while a desk's view
        reads them, and a value that was a tip a moment ago is still sent, as git's
        ``allowReachableSHA1InWant`` would. Only a want no answer here named, or whose
        ref no longer reaches it, is looked for among the tips of every ref (20-30 ms at
        2,500 refs, a forge of 500 briefs).
        """
        with self._lock:
            names = [self._advertised.get(oid) for oid in oids]
        if all(
            name is not None and self._reaches(repo, name, oid)
            for oid, name in zip(oids, names, strict=True)
        ):
            return True
        with self._lock:
            self.tip_walks += 1
        every = {ref.oid for ref in self._refs(repo, lambda name: True)}
        return all(oid in every for oid in oids)

    def _reaches(self, repo: Any, name: str, oid: str) -> bool:
        import pygit2

        value = self._value(repo, name)
        if value is None or value == oid:
            return value == oid
        try:
            return bool(repo.descendant_of(value, oid))
        except (KeyError, ValueError, pygit2.GitError):
            return False  # either is not a commit here

    def _note_advertised(self, refs: Sequence[_Ref]) -> None:
        """Remember which ref each value was answered under (:meth:`may_serve`); a note
        grown past :data:`ADVERTISED_KEPT` values starts over."""
        with self._lock:
            if len(self._advertised) + len(refs) > ADVERTISED_KEPT:
                self._advertised.clear()
            for ref in refs[:ADVERTISED_KEPT]:
                if ref.oid is not None:
                    self._advertised[ref.oid] = ref.name

    def receive_pack_advertisement(self) -> bytes | None:
        """``receive-pack``'s v0 advertisement (None: git must be asked for this one)."""
        if self.receive_pack_caps is None or (self.git_dir / "objects/info/alternates").exists():
            return None
        hidden = hide_patterns(self.config(), "receive")
        with self.repository() as repo:
            refs = self._refs(repo, lambda name: not _hidden(name, hidden))
        lines = [f"{r.oid} {r.name}" for r in refs] or [f"{ZERO_SHA} capabilities^{{}}"]
        lines[0] += "\0" + self.receive_pack_caps
        return b"".join(pkt_line(f"{line}\n".encode()) for line in lines) + FLUSH

    def refuse_stale_push(self, request: PushRequest | None) -> bytes | None:
        """receive-pack's own refusal of a push that can only lose, or None to start it.

        ``request`` is the push's head as :func:`parse_push` read it (None: not plain). A
        push is refused here when its command list is plain, asks only for what
        receive-pack advertised, the forge has no rule that could answer first
        (:func:`_push_rules`), and its commands are stale against the refs as they are
        now: for an atomic push any one (and those before it sit where they are expected),
        otherwise every one. That is the answer receive-pack would give on taking the ref
        locks (it re-checks there), as though the push lost the race at this instant;
        nothing is unpacked or written.
        """
        if request is None or not self.plain_push(request):
            return None
        with self.repository() as repo:
            current = [ref_value(repo, c.ref) for c in request.commands]
        return stale_refusal(request, current)

    def plain_push(self, request: PushRequest) -> bool:
        """:func:`pushable`, against what this forge's receive-pack advertised."""
        if self.receive_pack_caps is None:
            return False
        return pushable(self.git_dir, request, config=self.config(), offered=self.receive_pack_caps)

    def ls_refs(self, command: Command) -> bytes:
        """The answer to a v2 ``ls-refs`` request, as ``upload-pack`` writes it."""
        peel = symrefs = unborn = False
        prefixes: set[str] = set()
        for arg in command.arguments:
            if arg == "peel":
                peel = True
            elif arg == "symrefs":
                symrefs = True
            elif arg == "unborn":
                unborn = True
            elif arg.startswith("ref-prefix "):
                prefixes.add(arg[len("ref-prefix ") :])
            else:
                raise BadInput(f"ls-refs: unexpected argument {arg[:80]!r}")
        self._check_capabilities(command)
        config = self.config()
        unborn = unborn and _config_str(config, "lsrefs.unborn", "advertise") != "ignore"
        hidden = hide_patterns(config, "uploadpack")

        prefixed = _prefix_test(prefixes)

        def wanted(name: str) -> bool:
            return prefixed(name) and not _hidden(name, hidden)

        with self.repository() as repo:
            refs = self._named(repo, prefixes, wanted)
            if refs is None:
                refs = self._refs(repo, wanted)
            head = self._resolve(repo, "HEAD") if wanted("HEAD") else None
            if head is not None and (head.oid or (unborn and symrefs and head.symref_target)):
                refs.insert(0, head)
            out = [self._ls_line(repo, ref, peel=peel, symrefs=symrefs) for ref in refs]
        self._note_advertised(refs)
        return b"".join(pkt_line(line.encode()) for line in out) + FLUSH

    @staticmethod
    def _check_capabilities(command: Command) -> None:
        for capability in command.capabilities:
            key, _, value = capability.partition("=")
            if key == "object-format" and value != "sha1":
                raise BadInput(f"ls-refs: object-format {value[:40]!r} is not this forge's sha1")
            if key not in ("agent", "object-format", "server-option"):
                raise BadInput(f"ls-refs: unknown capability {capability[:80]!r}")

    @staticmethod
    def _ls_line(repo: Any, ref: _Ref, *, peel: bool, symrefs: bool) -> str:
        import pygit2

        line = f"{ref.oid} {ref.name}" if ref.oid is not None else f"unborn {ref.name}"
        if symrefs and ref.symref_target is not None:
            line += f" symref-target:{ref.symref_target}"
        if peel and ref.oid is not None:
            obj = repo[ref.oid]
            if obj.type == pygit2.enums.ObjectType.TAG:
                line += f" peeled:{obj.peel(None).id}"
        return line + "\n"


_FEW_PREFIXES = 64  # up to this many, str.startswith(tuple) is the faster test
_NAMED_PREFIXES = 64  # up to this many, ls-refs finds its refs by name, not by a walk


def _prefix_test(prefixes: set[str]) -> Callable[[str], bool]:
    """Whether a ref name starts with one of ``prefixes`` (every name when there are none)."""
    if not prefixes:
        return lambda name: True
    if len(prefixes) <= _FEW_PREFIXES:
        starts = tuple(prefixes)
        return lambda name: name.startswith(starts)
    # By set look-up of the name's own prefixes: a request may carry thousands of them.
    return lambda name: any(name[:end] in prefixes for end in range(len(name) + 1))


def _config_str(config: Any, key: str, default: str) -> str:
    try:
        return str(config[key]).lower()
    except KeyError:
        return default


# ------------------------------------------------------------------ a stale push, refused

# What a push may ask for and still be answered here; anything else goes to receive-pack.
_PUSH_CAPABILITIES = frozenset(
    {"report-status", "report-status-v2", "side-band-64k", "quiet", "atomic", "ofs-delta"}
)
MAX_PUSH_COMMANDS = 1000  # a longer command list is left to receive-pack
MAX_PUSH_HEAD = MAX_PUSH_COMMANDS * 200 + 4096  # bytes of a body read to find the list
_OID = re.compile(r"[0-9a-f]{40}")
# Ref names git's check_refname_format surely accepts, short enough that receive-pack's
# 4096-byte error line holds the whole message; any other name is left to receive-pack.
_PLAIN_REF = re.compile(
    r"refs/(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,200}/){0,20}[A-Za-z0-9_-][A-Za-z0-9_.-]{0,200}"
)
_BAND_PAYLOAD = 65515  # send_sideband's largest payload (LARGE_PACKET_MAX - 5)


@dataclass(frozen=True)
class PushCommand:
    """One line of a push's command list: move ``ref`` from ``old`` to ``new``."""

    old: str
    new: str
    ref: str


@dataclass(frozen=True)
class PushRequest:
    """The command list a ``receive-pack`` request starts with, and what it asks for."""

    commands: tuple[PushCommand, ...]
    capabilities: tuple[str, ...]
    pack_at: int  # where the pack starts in the body

    def asks(self, name: str) -> bool:
        return name in self.capabilities


def _plain_ref(name: str) -> bool:
    if not _PLAIN_REF.fullmatch(name) or ".." in name:
        return False
    return not any(part.endswith((".lock", ".")) for part in name.split("/"))


def _push_line(payload: bytes) -> PushCommand | None:
    try:
        text = payload.decode("ascii").removesuffix("\n")
    except UnicodeDecodeError:
        return None
    old, _, rest = text.partition(" ")
    new, _, ref = rest.partition(" ")
    if not (_OID.fullmatch(old) and _OID.fullmatch(new) and _plain_ref(ref)):
        return None
    return PushCommand(old, new, ref)


def parse_push(head: bytes) -> PushRequest | None:
    """The plain command list at the start of a push body, or None when ``head`` does not
    hold one whole (a lying length, no flush, shallow lines, a push certificate, a funny
    ref name, more than MAX_PUSH_COMMANDS commands, no pack after the flush) or it deletes
    a ref: such a request is receive-pack's to answer, not this module's."""
    listed = _command_list(head)
    if listed is None:
        return None
    commands, capabilities, pos = listed
    if any(command.new == ZERO_SHA for command in commands):
        return None
    pack = head[pos + 4 : pos + 16]
    if not commands or len(pack) < 12 or pack[:8] not in (b"PACK\0\0\0\2", b"PACK\0\0\0\3"):
        return None  # receive-pack's unpacker has its own words for a missing pack
    if len({c.ref for c in commands}) != len(commands):
        return None  # git has its own answer to one ref named twice
    return PushRequest(tuple(commands), capabilities, pos + 4)


def command_request(head: bytes) -> PushRequest | None:
    """Every command of a push's command list, deletions included, or None when ``head``
    does not start with a whole plain one: what the push rule
    (:func:`assay.forge.principals.refusal`) is asked about. ``pack_at`` is where a pack
    would start (a push of deletions alone has none). A body of a flush alone (git's probe
    before a chunked push) is a request of no commands."""
    listed = _command_list(head)
    if listed is None:
        return None
    commands, capabilities, pos = listed
    return PushRequest(tuple(commands), capabilities, pos + 4)


def role_refusal(request: PushRequest, reasons: Sequence[str | None]) -> bytes:
    """The report of a push refused whole by the push rule before anything was taken:
    ``ng <ref> <reason>`` for each command (git prints ``[remote rejected] <ref>
    (<reason>)``), the reasons on side band 2 too, in the framing the client asked for."""
    lines = [b"unpack ok\n"]
    for command, reason in zip(request.commands, reasons, strict=True):
        why = reason or "refused with the rest of this push"
        lines.append(f"ng {command.ref} {why}\n".encode())
    report = b""
    if request.asks("report-status") or request.asks("report-status-v2"):
        report = b"".join(pkt_line(line) for line in lines) + FLUSH
    if not request.asks("side-band-64k"):
        return report
    said = b"".join(sideband(2, f"error: {reason}\n".encode()) for reason in reasons if reason)
    return said + sideband(1, report) + FLUSH


def pushed_refs(head: bytes) -> list[str]:
    """The refs a push's command list names, deletions too, when every one is a plain ref
    name (else none): what a push will lock, for :mod:`assay.forge.reflocks`."""
    listed = _command_list(head)
    return [command.ref for command in listed[0]] if listed is not None else []


def _command_list(head: bytes) -> tuple[list[PushCommand], tuple[str, ...], int] | None:
    """The commands, capabilities and flush position of the command list at the start of
    ``head``, or None when it is not whole and plain."""
    commands: list[PushCommand] = []
    capabilities: tuple[str, ...] = ()
    pos = 0
    while True:
        size_hex = head[pos : pos + 4]
        if not _LENGTH.fullmatch(size_hex):
            return None
        size = int(size_hex, 16)
        if size == FLUSH_CODE:
            return commands, capabilities, pos
        if size < 5 or pos + size > len(head) or len(commands) >= MAX_PUSH_COMMANDS:
            return None
        payload = head[pos + 4 : pos + size]
        pos += size
        if not commands:
            payload, _, caps = payload.partition(b"\0")
            capabilities = tuple(caps.decode("ascii", "replace").split())
        command = _push_line(payload)
        if command is None:
            return None
        commands.append(command)


def ref_value(repo: Any, name: str) -> str | None:
    """A ref's value as receive-pack's lock reads it (libgit2: the loose file, else
    ``packed-refs``): its sha, ZERO_SHA when it does not exist, None when it is symbolic or
    unreadable (left to receive-pack)."""
    import pygit2

    try:
        ref = repo.references.get(name)
        if ref is None:
            return ZERO_SHA
        if ref.type == pygit2.enums.ReferenceType.SYMBOLIC:
            return None
        return str(ref.target)
    except (pygit2.GitError, ValueError):
        return None


def pushable(git_dir: Path, request: PushRequest, *, config: Any, offered: str) -> bool:
    """Whether ``request`` (a push's head as :func:`parse_push` read it) asks only for
    what receive-pack ``offered`` (its capability line) and this module words, of refs
    the forge does not hide, on a forge with no rule that could answer before its ref
    locks (:func:`_push_rules`)."""
    caps = {cap.partition("=")[0]: cap for cap in offered.split()}
    for cap in request.capabilities:
        key = cap.partition("=")[0]
        if key == "agent":
            continue
        if key not in caps or (cap != caps[key] and key != cap):
            return False
        if key not in _PUSH_CAPABILITIES and cap != "object-format=sha1":
            return False
    if _push_rules(git_dir, config):
        return False
    hidden = hide_patterns(config, "receive")
    return not any(_hidden(c.ref, hidden) for c in request.commands)


def stale_refusal(request: PushRequest, current: Sequence[str | None]) -> bytes | None:
    """receive-pack's answer when its ref locks find the refs of ``request`` at
    ``current`` (ZERO_SHA: missing; None: symbolic or unreadable) and the push can only
    lose: for an atomic push any one command stale (and those before it where they are
    expected), otherwise every one. None when it is not such a push."""
    # A ref that is missing but expected is not refused here: git's words for it
    # depend on the refs around it.
    stale = [
        cur not in (None, ZERO_SHA, c.old) for c, cur in zip(request.commands, current, strict=True)
    ]
    atomic = request.asks("atomic")
    if atomic:
        if not any(stale):
            return None
        first = stale.index(True)
        settled = list(current[:first]) == [c.old for c in request.commands[:first]]
        if not settled or ZERO_SHA in current[:first]:
            return None
        errors = [_lock_failure(request.commands[first], str(current[first]))]
    elif all(stale):
        errors = [
            _lock_failure(c, str(cur)) for c, cur in zip(request.commands, current, strict=True)
        ]
    else:
        return None
    return push_refusal(request, errors, atomic=atomic)


def _lock_failure(command: PushCommand, current: str) -> str:
    """receive-pack's words (from the files backend) for a command whose ref has moved."""
    if command.old == ZERO_SHA:
        return f"cannot lock ref '{command.ref}': reference already exists"
    return f"cannot lock ref '{command.ref}': is at {current} but expected {command.old}"


def sideband(band: int, data: bytes) -> bytes:
    return b"".join(
        pkt_line(bytes([band]) + data[at : at + _BAND_PAYLOAD])
        for at in range(0, len(data), _BAND_PAYLOAD)
    )


def push_refusal(request: PushRequest, errors: Sequence[str], *, atomic: bool) -> bytes:
    """What ``receive-pack --stateless-rpc`` 2.39 writes when every command of ``request``
    is refused at the ref lock: the lock errors (``errors``, on side band 2 when the client
    asked for side bands), then the report (``ng <ref> <reason>`` for each command) if it
    asked for one, framed on side band 1, then a flush."""
    reason = "atomic transaction failed" if atomic else "failed to update ref"
    report = b""
    if request.asks("report-status") or request.asks("report-status-v2"):
        lines = [b"unpack ok\n", *(f"ng {c.ref} {reason}\n".encode() for c in request.commands)]
        report = b"".join(pkt_line(line) for line in lines) + FLUSH
    if not request.asks("side-band-64k"):
        return report  # the errors went to receive-pack's stderr, not to the client
    said = b"".join(sideband(2, f"error: {error}\n".encode()) for error in errors)
    return said + sideband(1, report) + FLUSH


def _push_rules(git_dir: Path, config: Any) -> bool:
    """Whether the forge has anything that may answer a push before its ref locks do (a
    pre-receive or proc-receive hook, fast-forward rules, a work tree to protect)."""
    if (git_dir / "hooks" / "pre-receive").exists():
        return True
    for key in ("core.hooksPath", "receive.procReceiveRefs", "receive.certNonceSeed"):
        if list(config.get_multivar(key)):
            return True
    return _config_str(config, "receive.denyNonFastForwards", "false") in (
        "true",
        "yes",
        "on",
        "1",
    ) or _config_str(config, "core.bare", "true") not in ("true", "yes", "on", "1")
