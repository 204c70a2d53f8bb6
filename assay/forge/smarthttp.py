"""Git's smart-HTTP protocol, the parts a forge server can answer without starting git.

Every round trip over smart HTTP is two requests: a GET of ``info/refs`` (the ref
advertisement) and a POST. ``git http-backend`` answers both by starting ``upload-pack`` or
``receive-pack``; this module answers the reading half in process instead:

- the protocol v2 capability list of ``upload-pack`` (static for a given git and config),
- the v0 ref advertisement of ``receive-pack`` (the refs, read by libgit2, and the
  capabilities that git itself advertised when the server started),
- protocol v2 ``ls-refs`` (``ref-prefix``, ``symrefs``, ``peel``, ``unborn``),

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

FLUSH = b"0000"
DELIM = b"0001"
FLUSH_CODE = 0  # how pkt_lines() yields a flush packet
DELIM_CODE = 1  # and a delim packet
UPLOAD_PACK = "git-upload-pack"
RECEIVE_PACK = "git-receive-pack"
SERVICES = (UPLOAD_PACK, RECEIVE_PACK)
ZERO_OID = "0" * 40
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


@dataclass(frozen=True)
class _Ref:
    name: str
    oid: str | None
    symref_target: str | None


class RefServer:
    """Answers the reading requests of one repository in process.

    ``start()`` asks git once (two processes) for what it advertises, so the capability
    lines are git's own for this git and this config; afterwards no request starts one.
    """

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.upload_pack_v2 = b""
        self.receive_pack_caps: str | None = None
        self._lock = threading.Lock()
        self._repo: Any = None

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

    def _config(self) -> Any:
        import pygit2

        return pygit2.Config(os.fspath(self.git_dir / "config"))

    def _hide_patterns(self, config: Any, section: str) -> list[str]:
        patterns: list[str] = []
        for key in ("transfer.hiderefs", f"{section}.hiderefs"):
            patterns += [v.rstrip("/") for v in config.get_multivar(key)]
        return patterns

    def _refs(self, repo: Any, wanted: Callable[[str], bool]) -> list[_Ref]:
        """The refs under ``refs/`` that ``wanted`` keeps and that resolve to an object,
        sorted as git sorts (bytewise)."""
        names = [n for n in repo.references if n.startswith("refs/") and wanted(n)]
        found = [self._resolve(repo, name) for name in sorted(names, key=str.encode)]
        return [ref for ref in found if ref is not None and ref.oid is not None]

    @staticmethod
    def _resolve(repo: Any, name: str) -> _Ref | None:
        import pygit2

        try:
            ref = repo.references[name]
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
    def _repository(self) -> Iterator[Any]:
        """The one libgit2 handle, one request at a time (handles are not thread-safe);
        libgit2 re-reads loose refs and ``packed-refs`` when they change."""
        import pygit2

        with self._lock:
            if self._repo is None:
                self._repo = pygit2.Repository(os.fspath(self.git_dir))
            yield self._repo

    def receive_pack_advertisement(self) -> bytes | None:
        """``receive-pack``'s v0 advertisement (None: git must be asked for this one)."""
        if self.receive_pack_caps is None or (self.git_dir / "objects/info/alternates").exists():
            return None
        hidden = self._hide_patterns(self._config(), "receive")
        with self._repository() as repo:
            refs = self._refs(repo, lambda name: not _hidden(name, hidden))
        lines = [f"{r.oid} {r.name}" for r in refs] or [f"{ZERO_OID} capabilities^{{}}"]
        lines[0] += "\0" + self.receive_pack_caps
        return b"".join(pkt_line(f"{line}\n".encode()) for line in lines) + FLUSH

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
        config = self._config()
        unborn = unborn and _config_str(config, "lsrefs.unborn", "advertise") != "ignore"
        hidden = self._hide_patterns(config, "uploadpack")

        def wanted(name: str) -> bool:
            return not _hidden(name, hidden) and (not prefixes or _has_prefix_in(name, prefixes))

        with self._repository() as repo:
            refs = self._refs(repo, wanted)
            head = self._resolve(repo, "HEAD") if wanted("HEAD") else None
            if head is not None and (head.oid or (unborn and symrefs and head.symref_target)):
                refs.insert(0, head)
            out = [self._ls_line(repo, ref, peel=peel, symrefs=symrefs) for ref in refs]
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


def _has_prefix_in(name: str, prefixes: set[str]) -> bool:
    # By set look-up of the name's own prefixes: a request may carry thousands of them.
    return any(name[:end] in prefixes for end in range(len(name) + 1))


def _config_str(config: Any, key: str, default: str) -> str:
    try:
        return str(config[key]).lower()
    except KeyError:
        return default
