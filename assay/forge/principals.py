"""Who may write what on an embedded forge: its tokens, their roles, and the one push rule.

A forge's tokens live in ``<forge.git>/assay-tokens.json`` (mode 0600, written atomically):
each a name, a role and the sha256 of the token, never the token itself. The file is not
under ``refs/`` and the server serves nothing but git's two services, so it is never
served. A forge without the file is open (anyone who reaches its server may write); with
it, even empty, every request needs ``Authorization: Bearer <token>``.

:func:`refusal` is the one push rule: the server asks it about every command of a push
before any ref moves, on the in-process path and the ``git receive-pack`` path alike.
Local filesystem access to the forge is the admin's path and is not checked here.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import assay.refs as refs
from assay.errors import BadInput
from assay.ids import check_id
from assay.plumbing import ZERO_SHA

TOKENS_FILE = "assay-tokens.json"
TOKENS_VERSION = 1
ROLES = ("desk", "gate", "sweeper", "person", "admin")
MAX_TOKENS_BYTES = 1 << 20

# What each role may write (ref prefixes or whole ref names); admin writes anything.
WRITES: Mapping[str, tuple[str, ...]] = {
    "desk": (refs.CLAIMS, refs.BRANCHES, refs.JOURNALS, refs.REVIEWS),
    "gate": (refs.EVIDENCE, refs.REVIEWS, refs.MAIN, refs.RUNS),
    "person": (refs.EVENTS, refs.MAIN, refs.HOLDOUT),
    "sweeper": (refs.STATUS, refs.SWEEPS, refs.CLAIMS),
}
# Where a role other than admin may delete a ref.
DELETES: Mapping[str, tuple[str, ...]] = {
    "sweeper": (refs.STATUS, refs.SWEEPS),
}
# A brief's refs a desk writes only while the brief's claim names it.
_HELD = (refs.BRANCHES, refs.JOURNALS, refs.REVIEWS)
# Refs only admin deletes or moves other than forward.
_GUARDED = (refs.CLAIMS, refs.EVIDENCE, refs.MAIN, refs.CONFIG)


@dataclass(frozen=True)
class Principal:
    """Who a request's token says it comes from."""

    name: str
    role: str


def tokens_path(forge: Path) -> Path:
    return Path(forge) / TOKENS_FILE


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_role(role: str) -> str:
    if role not in ROLES:
        raise BadInput(f"--role {role!r}: must be one of {', '.join(ROLES)}")
    return role


def read_tokens(forge: Path) -> list[dict[str, str]] | None:
    """The forge's token entries (``name``, ``role``, ``sha256``); None when it has no
    token file at all (an open forge). A malformed file is ``BadInput`` naming it."""
    path = tokens_path(forge)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the token file: {exc.strerror}") from exc
    return _decode(path, raw)


def _decode(path: Path, raw: bytes) -> list[dict[str, str]]:
    if len(raw) > MAX_TOKENS_BYTES:
        raise BadInput(f"{path}: the token file is over {MAX_TOKENS_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{path}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("v") != TOKENS_VERSION:
        raise BadInput(f"{path}: v must be {TOKENS_VERSION}")
    entries = data.get("tokens")
    if not isinstance(entries, list):
        raise BadInput(f"{path}: tokens must be a list")
    found: list[dict[str, str]] = []
    for at, entry in enumerate(entries):
        where = f"{path}: tokens[{at}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "role", "sha256"}:
            raise BadInput(f"{where} must hold exactly name, role and sha256")
        check_id(str(entry["name"]), what="name", where=where)
        if entry["role"] not in ROLES:
            raise BadInput(f"{where}: role {str(entry['role'])[:20]!r} is not one of {ROLES}")
        digest = entry["sha256"]
        if (
            not isinstance(digest, str)
            or len(digest) != 64
            or set(digest) - set("0123456789abcdef")
        ):
            raise BadInput(f"{where}: sha256 must be 64 lowercase hex digits")
        found.append({"name": entry["name"], "role": entry["role"], "sha256": digest})
    return found


def _write_tokens(forge: Path, entries: list[dict[str, str]]) -> None:
    """Replace the token file atomically, mode 0600 from its first byte."""
    path = tokens_path(forge)
    payload = json.dumps({"v": TOKENS_VERSION, "tokens": entries}, indent=2) + "\n"
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".assay-tokens.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def add_token(forge: Path, name: str, role: str) -> str:
    """Make a new token for ``name`` with ``role``, store its digest, return it (once)."""
    check_id(name, what="token name", where="assay forge token add")
    check_role(role)
    entries = read_tokens(forge) or []
    if any(entry["name"] == name for entry in entries):
        raise BadInput(f"token {name!r} exists on {forge} (revoke it first)")
    token = secrets.token_urlsafe(32)
    _write_tokens(forge, [*entries, {"name": name, "role": role, "sha256": _digest(token)}])
    return token


def revoke_token(forge: Path, name: str) -> None:
    """Remove ``name``'s token; the file stays, so a forge whose last token is revoked is
    closed to everyone, not opened."""
    check_id(name, what="token name", where="assay forge token revoke")
    entries = read_tokens(forge) or []
    kept = [entry for entry in entries if entry["name"] != name]
    if len(kept) == len(entries):
        raise BadInput(f"assay forge token revoke: no token named {name!r} on {forge}")
    _write_tokens(forge, kept)


def list_tokens(forge: Path) -> list[Principal]:
    return [Principal(e["name"], e["role"]) for e in read_tokens(forge) or []]


class Tokens:
    """The server's view of the token file, re-read whenever it changes (a revoked token is
    refused from the next request on)."""

    def __init__(self, forge: Path) -> None:
        self.path = tokens_path(forge)
        self._seen: tuple[int, int, int] | None = None
        self._entries: list[dict[str, str]] | None = None

    def entries(self) -> list[dict[str, str]] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key != self._seen:
            self._entries, self._seen = read_tokens(self.path.parent), key
        return self._entries

    @property
    def open(self) -> bool:
        """True when the forge has no token file: anyone may read and write."""
        return self.entries() is None

    def principal(self, authorization: str) -> Principal | None:
        """The principal an ``Authorization`` header names, or None when it names none."""
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = _digest(token.strip())
        found = None
        for entry in self.entries() or []:
            if hmac.compare_digest(entry["sha256"], digest):  # every entry, no early exit
                found = Principal(entry["name"], entry["role"])
        return found


def refusal(
    principal: Principal,
    old: str,
    new: str,
    ref: str,
    *,
    fast_forward: Callable[[], bool | None],
    claim_desk: Callable[[], str | None],
    holder_of: Callable[[str], str | None] = lambda brief: None,
) -> str | None:
    """Why ``principal`` may not move ``ref`` from ``old`` to ``new`` (None: it may).

    ``fast_forward`` says whether ``new`` descends from ``old`` (None: not known here); it
    is asked only of an update of a claim or of main. An unknown answer is allowed here and
    left to receive-pack's ``receive.denyNonFastForwards``, which the server sets then.
    ``claim_desk`` is the ``desk`` the claim record at ``new`` names (None: none can be
    read); a desk writes only claims naming itself, by its token's name. ``holder_of(brief)``
    is the desk the brief's claim names as this push leaves it (the claim pushed beside, else
    the forge's): a desk writes a brief's branch, journal and review only while that is itself."""
    role = principal.role
    if role == "admin":
        return None
    if role == "gate" and old == new and old != ZERO_SHA:
        return None  # pinning a ref at its own value
    if not ref.startswith(WRITES.get(role, ())):
        return f"role {role} may not write {ref}"
    if new == ZERO_SHA:
        if ref.startswith(_GUARDED):
            return f"only admin deletes {ref}"
        if not ref.startswith(DELETES.get(role, ())):
            return f"role {role} may not delete {ref}"
        return None
    if role == "desk" and ref.startswith(refs.CLAIMS):
        desk = claim_desk()
        if desk != principal.name:
            named = "no desk" if desk is None else f"desk {desk[:100]!r}"
            return f"desk {principal.name} may not write a claim naming {named}"
    if role == "desk" and ref.startswith(_HELD):
        brief = next(ref[len(prefix) :] for prefix in _HELD if ref.startswith(prefix))
        holder = holder_of(brief)
        if holder != principal.name:
            named = "no claim" if holder is None else f"a claim naming desk {holder[:100]!r}"
            return f"desk {principal.name} may not write {ref}: the brief has {named}"
    if role == "sweeper" and ref.startswith(refs.CLAIMS) and old == ZERO_SHA:
        return f"role sweeper may only mark existing claims, not create {ref}"
    moves = old != ZERO_SHA and old != new and ref.startswith(_GUARDED)
    if moves and fast_forward() is False:
        return f"role {role} may not force {ref} (not a fast-forward)"
    return None


def is_fast_forward(repo: Any, objects: Mapping[str, Any], old: str, new: str) -> bool | None:
    """Whether commit ``new`` descends from ``old``, walking the pushed commits
    (``objects``, as :func:`assay.forge.packfile.read_pack` reads them) down to commits the
    forge holds; None when that cannot be told (a parent in neither)."""
    import pygit2

    from assay.forge.packfile import names

    todo, seen = [new], set()
    while todo:
        sha = todo.pop()
        if sha == old:
            return True
        if sha in seen:
            continue
        seen.add(sha)
        if len(seen) > 100_000:
            return None
        found = objects.get(sha)
        if found is not None:
            if found.kind != "commit":
                return None
            todo += names(found, sha, "push")[1:]
            continue
        try:
            if sha not in repo:
                return None
            if repo.descendant_of(sha, old):
                return True
        except (KeyError, ValueError, pygit2.GitError):
            return None
    return False


def claim_desk(repo: Any, objects: Mapping[str, Any], commit: str) -> str | None:
    """The ``desk`` of the claim record (``claim.json``) at ``commit``, read from the pushed
    objects or the forge; None when there is none or it does not read."""
    import pygit2

    from assay.claims.record import CLAIM_FILE
    from assay.forge.packfile import tree_entries

    kinds = {1: "commit", 2: "tree", 3: "blob"}

    def read(sha: str, kind: str) -> bytes | None:
        found = objects.get(sha)
        if found is not None:
            return bytes(found.data) if found.kind == kind else None
        try:
            number, data = repo.read(sha)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return bytes(data) if kinds.get(int(number)) == kind else None

    raw = read(commit, "commit")
    if raw is None or not raw.startswith(b"tree "):
        return None
    tree = raw[5:45].decode("ascii", "replace")
    listing = read(tree, "tree")
    if listing is None:
        return None
    try:
        entries = tree_entries(listing, tree, "push")
    except Exception:  # a malformed tree names no desk
        return None
    blob = next((sha for _, name, sha in entries if name == CLAIM_FILE.encode()), None)
    data = read(blob, "blob") if blob is not None else None
    if data is None or len(data) > MAX_TOKENS_BYTES:
        return None
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    desk = record.get("desk") if isinstance(record, dict) else None
    return desk if isinstance(desk, str) else None
