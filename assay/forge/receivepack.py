"""git's receive-pack for a plain push, taken in process: by the forge server, and by the
pusher itself on a local forge.

A claim, a step or a record reaches the forge as a push of a few small objects and one or
more compare-and-swap commands. ``git receive-pack`` takes it with three processes of its
own (itself, ``unpack-objects``, and the connectivity check's ``rev-list``, which marks
every ref of the forge: 2,500 of them at 500 briefs). This module takes the pushes that
need nothing more than that, as git would:

1. **What it takes.** A plain command list (:func:`smarthttp.parse_push`: no deletes, no
   push options or certificates), only capabilities receive-pack advertised, a forge with
   no hook but ``post-receive`` and nothing in its config that acts on a push
   (:func:`takes_pushes`), and at most :data:`UNPACK_LIMIT` objects (git's own
   ``receive.unpackLimit``, below which it too stores loose objects).
2. **Read and complete.** The pack is read by :mod:`assay.forge.packfile` (every object
   hashed afresh); whatever an object names is in the pack or in the forge.
3. **Connected.** What the pack names and does not carry must already be reachable from a
   ref, as ``rev-list --not --all`` would find it: a commit is a current value of one of the
   pushed refs or of ``main``, an ancestor of one, or a branch tip; a tree or blob sits at
   the same path in a parent commit (which is how :mod:`assay.forge.sendpack` leaves objects
   out). An object found nowhere is not refused here: git is asked.
4. **Written contents first**, so no stored object names a missing one at any instant.
5. **The refs moved as git's files backend moves them**: each ``<ref>.lock`` created
   exclusively (a held lock is git's to wait for), the current values read under the locks
   (the loose file, else ``packed-refs``) and compared with the commands' old values, each
   lock written and renamed over its ref. A lock left by a SIGKILL is cleared as a killed
   receive-pack's is (:mod:`assay.forge.reflocks`), by the server or the next local push.
6. **The report** receive-pack writes, in the framing asked for; the caller then runs
   ``post-receive`` (:func:`run_post_receive`) as receive-pack would, after the report.

Anything else (a check that does not pass, a lock held, a ref not where the command says)
is ``None`` before any ref moved: ``git receive-pack`` is started on the same body, and
answers in git's own words. The objects already written are complete and reachable
from no ref, as those of a push that lost its race.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import assay.refs as refs
from assay.errors import ForgeUnavailable
from assay.forge.packfile import (
    SHA_BYTES,
    PackObject,
    TooLarge,
    first_gap,
    names,
    read_pack,
    tree_entries,
    write_contents_first,
)
from assay.forge.smarthttp import (
    FLUSH,
    MAX_PUSH_HEAD,
    PushCommand,
    PushRequest,
    parse_push,
    pkt_line,
    pushable,
    ref_value,
    sideband,
    stale_refusal,
)
from assay.odb import read_refs
from assay.plumbing import ZERO_SHA, run_git

UNPACK_LIMIT = 100  # receive.unpackLimit's default: git keeps a larger push as a pack
MAX_BODY = 4 << 20  # bytes of a push body read into memory here; a larger one is git's
HOOK_TIMEOUT_S = 600
# The hooks receive-pack runs besides post-receive: a forge with any of them is git's.
_OTHER_HOOKS = (
    "pre-receive",
    "update",
    "post-update",
    "reference-transaction",
    "proc-receive",
    "push-to-checkout",
)
# Config keys that change nothing a plain push does (the hidden refs are checked by the
# caller, unpackLimit only says how git would store what is written loose here).
_INERT_CONFIG = frozenset(
    {
        "receive.advertisepushoptions",
        "receive.autogc",
        "receive.hiderefs",
        "receive.unpacklimit",
        "transfer.hiderefs",
        "transfer.unpacklimit",
        "transfer.advertisesid",
        "core.logallrefupdates",  # allowed only as false: see takes_pushes
        "core.bare",  # allowed only as true
        "core.repositoryformatversion",  # allowed only as 0
    }
)
_ACTIVE_SECTIONS = ("receive.", "transfer.", "core.", "extensions.")
_HEX = re.compile(r"[0-9a-f]+")
_MODE_KINDS = {b"40000": "tree", b"160000": "commit"}  # any other mode names a blob


@dataclass(frozen=True)
class Received:
    """A push answered here: the answer for the client and the commands that moved their
    refs. When some did and the client asked for side bands, ``post-receive``'s output
    and a flush follow the answer (:meth:`closing`)."""

    answer: bytes
    updated: tuple[PushCommand, ...]
    side_band: bool

    def closing(self, said: bytes) -> bytes:
        """What follows the answer: ``post-receive``'s output ``said`` on side band 2 and a
        flush, when the client reads side bands and refs moved."""
        return sideband(2, said) + FLUSH if self.updated and self.side_band else b""


# What git 2.39's receive-pack offers a push on a forge whose config leaves it be (one
# with settings that change it is not taken here: takes_pushes).
LOCAL_OFFER = (
    "report-status report-status-v2 delete-refs side-band-64k quiet atomic ofs-delta "
    "object-format=sha1"
)


def take_locally(git_dir: Path, body: bytes, env: Mapping[str, str]) -> bytes | None:
    """The whole answer to the push ``body`` into the local forge at ``git_dir``, taken in
    this process as the forge server takes it (``post-receive`` run with ``env``); None when
    ``git receive-pack`` must take it. The locks on its refs are waited for first, and one
    :data:`reflocks.STALE_AFTER_S` old removed (a killed writer's), as the server does."""
    import pygit2

    from assay.forge import reflocks

    request = parse_push(body[:MAX_PUSH_HEAD])
    if request is None or len(body) > MAX_BODY:
        return None
    try:
        repo = pygit2.Repository(os.fspath(git_dir))
        config = repo.config  # git reads the user's config too on a local push
        if not pushable(git_dir, request, config=config, offered=LOCAL_OFFER):
            return None
        if not takes_pushes(git_dir, config):
            return None
    except pygit2.GitError:
        return None  # not a repository libgit2 opens: git's to say so
    reflocks.clear_stale(git_dir, [c.ref for c in request.commands])
    received = receive(git_dir, repo, request, body)
    if received is None:
        return None
    said = run_post_receive(git_dir, received.updated, env)
    if received.updated and _gc_due(git_dir, config):
        # receive-pack would run `git gc --auto` after every push; its first test is cheap
        # enough to make here, and git decides the rest.
        run_git(["gc", "--auto", "--quiet"], git_dir=git_dir, check=False)
    return received.answer + received.closing(said)


def _gc_due(git_dir: Path, config: Any) -> bool:
    """git gc --auto's own first test (``too_many_loose_objects``): more loose objects in
    ``objects/17/`` than ``gc.auto`` / 256, on a forge whose ``receive.autogc`` is on."""
    import pygit2

    try:
        if not config.get_bool("receive.autogc"):
            return False
    except (KeyError, pygit2.GitError, ValueError):
        pass  # unset: on, as in git
    try:
        limit = int(config.get_int("gc.auto"))
    except (KeyError, pygit2.GitError, ValueError):
        limit = 6700
    if limit <= 0:
        return False
    try:
        names = os.listdir(git_dir / "objects" / "17")
    except FileNotFoundError:
        return False
    loose = sum(
        len(name) == 2 * SHA_BYTES - 2 and _HEX.fullmatch(name) is not None for name in names
    )
    return loose > (limit + 255) // 256


def takes_pushes(git_dir: Path, config: Any) -> bool:
    """Whether pushes to this forge may be taken here: no hook but ``post-receive``, and
    no setting that acts on a push (fsck, reflogs, deny rules, ``hooksPath``, shared
    permissions, alternates, a repository format git alone knows)."""
    hooks = git_dir / "hooks"
    if any(os.access(hooks / name, os.X_OK) for name in _OTHER_HOOKS):
        return False
    if (git_dir / "objects" / "info" / "alternates").exists():
        return False
    for entry in config:
        key = entry.name.lower()
        if not key.startswith(_ACTIVE_SECTIONS):
            continue
        if key not in _INERT_CONFIG:
            if key.startswith("core.") and not key.startswith(
                ("core.hookspath", "core.sharedrepository", "core.fsync")
            ):
                continue  # the rest of core.* is about work trees, caches and output
            return False
        value = str(entry.value).lower()
        if key == "core.logallrefupdates" and value not in ("false", "no", "off", "0"):
            return False
        if key == "core.bare" and value not in ("true", "yes", "on", "1"):
            return False
        if key == "core.repositoryformatversion" and value != "0":
            return False
    return True


def receive(git_dir: Path, repo: Any, request: PushRequest, body: bytes) -> Received | None:
    """Take the push ``body`` (its command list parsed as ``request``) into the forge at
    ``git_dir`` (``repo``: a libgit2 handle of it); None when git must take it instead.

    The caller has checked the capabilities and :func:`takes_pushes`."""
    pack = body[request.pack_at :]
    if len(pack) < 12 or int.from_bytes(pack[8:12], "big") > UNPACK_LIMIT:
        return None
    try:
        objects = read_pack(pack, "push")
        complete = _complete(repo, objects)
    except (ForgeUnavailable, TooLarge):
        return None  # receive-pack has its own words for a broken pack
    if not complete or not all(_points_at_commit(repo, objects, c.new) for c in request.commands):
        return None  # incomplete, or a non-commit for a ref: git's to refuse in its words
    olds = [c.old for c in request.commands]
    # Objects first, outside the locks (a lock is held for microseconds, as git holds it),
    # and only for a push not already seen to lose (a loser's objects would be garbage).
    written = [ref_value(repo, c.ref) for c in request.commands] == olds
    if written:
        try:
            if not _connected(repo, request.commands, objects):
                return None
            write_contents_first(repo, objects, "push")
        except ForgeUnavailable:
            return None
    with _locked(git_dir, repo, request.commands) as locked:
        if locked is None:
            return None
        values = [ref_value(repo, c.ref) for c in request.commands]
        if values != olds:
            # Lost at the lock, as receive-pack would find it (or git's to word).
            refusal = None if None in values else stale_refusal(request, values)
            return None if refusal is None else Received(refusal, (), side_band=False)
        if not written:
            return None  # the refs came back to the old values meanwhile: git's to judge
        locked.commit()
    lines = [b"unpack ok\n", *(f"ok {c.ref}\n".encode() for c in request.commands)]
    report = b"".join(pkt_line(line) for line in lines) + FLUSH
    wants_report = request.asks("report-status") or request.asks("report-status-v2")
    side_band = request.asks("side-band-64k")
    answer = report if wants_report else b""
    if side_band:
        answer = sideband(1, answer)
    return Received(answer, request.commands, side_band)


def pushed_objects(request: PushRequest, body: IO[bytes], repo: Any) -> dict[str, PackObject]:
    """The objects of a push's pack (``body`` a file at its start, left there), read
    without storing them, a thin pack's bases found in the forge (``repo``): what the push
    rule reads. Empty when the pack is larger than :data:`MAX_BODY` or does not read (git
    is then left to judge)."""
    import pygit2

    kinds = {1: "commit", 2: "tree", 3: "blob"}

    def base(sha: str) -> PackObject | None:
        try:
            number, data = repo.read(sha)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        kind = kinds.get(int(number))
        return PackObject(kind, bytes(data)) if kind is not None else None

    data = body.read(MAX_BODY + 1)
    body.seek(0)
    pack = data[request.pack_at :]
    if len(data) > MAX_BODY or len(pack) < 12:
        return {}
    try:
        return read_pack(pack, "push", bases=base)
    except (ForgeUnavailable, TooLarge):
        return {}


def run_post_receive(
    git_dir: Path, updated: Sequence[PushCommand], env: Mapping[str, str]
) -> bytes:
    """Run the forge's ``post-receive`` hook (if it has one) as receive-pack runs it: in the
    repository, ``GIT_DIR=.``, one ``<old> <new> <ref>`` line per moved ref on its stdin; what
    it wrote (stdout and stderr, as the pusher hears it)."""
    hook = git_dir / "hooks" / "post-receive"
    if not updated or not os.access(hook, os.X_OK):
        return b""
    lines = "".join(f"{c.old} {c.new} {c.ref}\n" for c in updated).encode()
    try:
        done = subprocess.run(
            [str(hook)],
            cwd=git_dir,
            input=lines,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**env, "GIT_DIR": "."},
            timeout=HOOK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: post-receive: {exc}\n".encode()
    return done.stdout


# ---------------------------------------------------------------------------- objects


def _complete(repo: Any, objects: Mapping[str, PackObject]) -> bool:
    """Whether everything the pack's objects name is in the pack or the forge (and the pack
    carries no tag, which is git's to take)."""
    if any(found.kind == "tag" for found in objects.values()):
        return False
    return first_gap(repo, objects, "push") is None


def _connected(
    repo: Any,
    commands: Sequence[PushCommand],
    objects: Mapping[str, PackObject],
) -> bool:
    """Whether every object the new tips reach is in the pack or reachable from a ref:
    from the commands' old values (which the refs are found at under the locks before
    anything moves) or from main."""
    tips = {c.old for c in commands if c.old != ZERO_SHA}
    main = ref_value(repo, refs.MAIN)
    if main is not None and main != ZERO_SHA:
        tips.add(main)
    reachable = _Reachable(repo, tips)
    for command in commands:
        if command.new not in objects and not reachable.commit(command.new):
            return False
    trees = _Trees(repo, objects)
    for sha, found in objects.items():
        if found.kind != "commit":
            continue
        tree, *parents = names(found, sha, "push")
        for parent in parents:
            if parent in objects:
                if objects[parent].kind != "commit":
                    return False  # rev-list would find a parent that is no commit
            elif not reachable.commit(parent):
                return False
        parent_trees = [trees.tree_of(p) for p in parents]
        if not trees.connected(tree, parent_trees):
            return False
    return True


class _Reachable:
    """Commits known reachable from a ref: the given tips, their ancestors, branch tips."""

    def __init__(self, repo: Any, tips: set[str]) -> None:
        self.repo = repo
        self.tips = tips
        self._branches: set[str] | None = None

    def commit(self, sha: str) -> bool:
        import pygit2

        if sha in self.tips:
            return True
        try:
            if self.repo[sha].type_str != "commit":
                return False
            if any(self.repo.descendant_of(tip, sha) for tip in self.tips):
                return True
        except (KeyError, ValueError, pygit2.GitError):
            return False
        if self._branches is None:  # a merge's second parent: another branch's tip
            self._branches = set(_branch_tips(self.repo))
        return sha in self._branches


def _branch_tips(repo: Any) -> Iterator[str]:
    import pygit2

    with contextlib.suppress(pygit2.GitError):
        for ref in repo.references.iterator():
            if ref.name.startswith(refs.HEADS) and ref.type == pygit2.enums.ReferenceType.DIRECT:
                yield str(ref.target)


class _Trees:
    """Trees read from the pack or the forge, and which pack trees are known connected."""

    def __init__(self, repo: Any, objects: Mapping[str, PackObject]) -> None:
        self.repo = repo
        self.objects = objects
        self._connected: set[str] = set()

    def raw(self, sha: str, kind: str) -> bytes:
        found = self.objects.get(sha)
        if found is not None:
            return found.data if found.kind == kind else b""
        obj = self.repo.get(sha)
        return bytes(obj.read_raw()) if obj is not None and obj.type_str == kind else b""

    def entries(self, sha: str) -> dict[bytes, tuple[str, str]]:
        """``{name: (kind, sha)}`` of a tree, the kind its entry's mode says (empty when
        ``sha`` is not a tree)."""
        return {
            name: (_MODE_KINDS.get(mode, "blob"), named)
            for mode, name, named in tree_entries(self.raw(sha, "tree"), sha, "push")
        }

    def tree_of(self, commit: str) -> str:
        """The tree of a commit in the pack or the forge (one known to be a commit)."""
        return names(PackObject("commit", self.raw(commit, "commit")), commit, "push")[0]

    def connected(self, tree: str, parent_trees: Sequence[str]) -> bool:
        """Whether ``tree`` and all it reaches are in the pack, or at the same path in one
        of ``parent_trees`` (trees of commits reachable from a ref or in the pack), each
        object of the kind its entry's mode says (as ``rev-list --objects`` reads them)."""
        if tree not in self.objects:
            return tree in parent_trees
        if self.objects[tree].kind != "tree":
            return False
        if tree in self._connected:
            return True
        parents = [self.entries(p) for p in parent_trees]
        for name, (kind, sha) in self.entries(tree).items():
            if kind == "commit":
                continue  # a submodule's commit is not an object of this repository
            same = [entries[name] for entries in parents if name in entries]
            if sha in self.objects:
                fits = self.objects[sha].kind == kind and (
                    kind != "tree" or self.connected(sha, [s for k, s in same if k == "tree"])
                )
            else:
                fits = (kind, sha) in same
            if not fits:
                return False
        self._connected.add(tree)
        return True


def _points_at_commit(repo: Any, objects: Mapping[str, PackObject], sha: str) -> bool:
    found = objects.get(sha)
    if found is not None:
        return found.kind == "commit"
    obj = repo.get(sha)
    return obj is not None and obj.type_str == "commit"


# ---------------------------------------------------------------------------- ref files


class _Locks:
    """The ``.lock`` files of one push's refs, held: ``commit`` renames them over the refs."""

    def __init__(self, git_dir: Path, repo: Any, commands: Sequence[PushCommand]) -> None:
        self.git_dir = git_dir
        self.repo = repo
        self.commands = commands
        self.held: list[Path] = []
        self.committed = False

    def take(self) -> bool:
        for command in sorted(self.commands, key=lambda c: c.ref):
            path = self.git_dir / command.ref
            lock = path.with_name(path.name + ".lock")
            try:
                if command.old == ZERO_SHA and not _creatable(self.git_dir, self.repo, command.ref):
                    return False
                lock.parent.mkdir(parents=True, exist_ok=True)
                handle = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except OSError:
                return False  # held by another writer, or a file/folder in the way
            self.held.append(lock)
            try:
                os.write(handle, f"{command.new}\n".encode())
            finally:
                os.close(handle)
        return True

    def commit(self) -> None:
        for command in self.commands:
            path = self.git_dir / command.ref
            os.rename(path.with_name(path.name + ".lock"), path)
        self.committed = True
        self.held = []

    def release(self) -> None:
        for lock in self.held:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
        self.held = []


@contextlib.contextmanager
def _locked(git_dir: Path, repo: Any, commands: Sequence[PushCommand]) -> Iterator[_Locks | None]:
    locks = _Locks(git_dir, repo, commands)
    try:
        yield locks if locks.take() else None
    finally:
        if not locks.committed:
            locks.release()


def _creatable(git_dir: Path, repo: Any, ref: str) -> bool:
    """Whether ``ref`` can be created without a name clash (a ref at one of its prefixes,
    or refs below it), loose or packed. (The ref itself existing is a stale command.)"""
    if (git_dir / ref).is_dir() or read_refs(git_dir, ref + "/"):
        return False
    parts = ref.split("/")
    return all(ref_value(repo, "/".join(parts[:end])) == ZERO_SHA for end in range(2, len(parts)))
