"""In-process git: refs read from the ref files, objects read and trees committed by libgit2.

Every git process costs a few milliseconds of start-up and CPU before it does anything, and
a brief's life used to start about eighty of them, most only to read a ref, a blob or a
commit's parents, or to stage and commit the work tree. This module does those in the
calling process; :mod:`assay.plumbing` keeps everything that talks to a remote (fetch and
the CAS push), where git's own transport and lease semantics are the point.

Refs are read straight from the files git writes (loose ref files, renamed into place
atomically, then ``packed-refs``); objects through libgit2 (``pygit2``), which reads loose
objects and packs alike and re-scans the packs when a fetch has added one. ``pygit2`` is
imported on first use, so commands that never read an object do not pay for it, and each
thread gets its own repository handle (libgit2 handles are not shared across threads).
"""

from __future__ import annotations

import bisect
import os
import re
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    import pygit2

T = TypeVar("T")

_SHA = re.compile(r"[0-9a-f]{40}")
_LOCAL = threading.local()


class ObjectMissing(LookupError):
    """The object (or the commit a path was read from) is not in the repository."""


def repository(git_dir: Path) -> pygit2.Repository:
    """A libgit2 handle on ``git_dir`` for this thread (opened once, then reused)."""
    import pygit2

    handles: dict[str, pygit2.Repository] | None = getattr(_LOCAL, "handles", None)
    if handles is None:
        handles = _LOCAL.handles = {}
    key = os.fspath(git_dir)
    handle = handles.get(key)
    if handle is None:
        handle = handles[key] = pygit2.Repository(key)
    return handle


def forget(git_dir: Path) -> None:
    """Drop this thread's handle on ``git_dir`` (a work tree that was re-initialised)."""
    handles = getattr(_LOCAL, "handles", None)
    if handles is not None:
        handles.pop(os.fspath(git_dir), None)


def forget_all() -> None:
    """Drop every handle of this thread (a forked child starts with none of its parent's)."""
    _LOCAL.handles = {}


# ---------------------------------------------------------------------------- refs


def read_refs(git_dir: Path, pattern: str) -> dict[str, str]:
    """``{ref: sha}`` of the repository's refs matching ``pattern``, sorted by name.

    Loose ref files win over ``packed-refs`` (git writes the loose file last). Symbolic
    refs and lock files are skipped, as ``for-each-ref --format=%(objectname)`` would
    resolve or ignore them for the namespaces Assay reads.
    """
    git_dir = Path(git_dir)
    refs = _packed_refs(git_dir).matching(pattern)
    root = git_dir / pattern.rstrip("/")
    for path in _ref_files(root, below_only=pattern.endswith("/")):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue  # deleted (or replaced by a folder) while we looked
        if _SHA.fullmatch(text):
            refs[path.relative_to(git_dir).as_posix()] = text
    return dict(sorted(refs.items()))


# A ref-prefix whose folders are plain ref-name components: its loose refs lie in one folder
# of the repository, and nothing it names leads out of ``refs/``.
_PLAIN_PREFIX = re.compile(r"refs/(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*/)*[A-Za-z0-9_.-]*")


def ref_names(git_dir: Path, prefix: str) -> set[str] | None:
    """The names of the repository's refs that start with ``prefix`` as a string (protocol
    v2 ``ref-prefix``'s rule, where for-each-ref's is a folder's), loose and packed, their
    files unread; None for a prefix that is not a plain path under ``refs/``.

    One folder is listed, and only the folders below it whose names start as the prefix
    does are walked: a prefix naming one brief's ref reads none of the others.
    """
    if not _PLAIN_PREFIX.fullmatch(prefix) or ".." in prefix:
        return None
    git_dir = Path(git_dir)
    names = set(_packed_refs(git_dir).starting(prefix))
    folder, _, leaf = prefix.rpartition("/")
    try:
        entries = list(os.scandir(git_dir / folder))
    except (FileNotFoundError, NotADirectoryError):
        return names
    for entry in entries:
        if not entry.name.startswith(leaf) or entry.name.endswith(".lock"):
            continue
        if entry.is_dir(follow_symlinks=False):
            below = _ref_files(Path(entry.path), below_only=True)
            names.update(path.relative_to(git_dir).as_posix() for path in below)
        elif entry.is_file(follow_symlinks=False):
            names.add(f"{folder}/{entry.name}")
    return names


class _PackedRefs:
    """``packed-refs`` parsed once per version of the file: git rewrites it whole, through
    a lock file renamed into place, so a new version is a new inode. A forge's holds every
    ref after a ``gc``, and each push creating a ref asks what lies below its name."""

    def __init__(self, stamp: tuple[int, int, int], values: dict[str, str]) -> None:
        self.stamp = stamp
        self.values = values
        self.names = sorted(values)

    def matching(self, pattern: str) -> dict[str, str]:
        """``{ref: sha}`` of the packed refs ``pattern`` matches. for-each-ref's rule: a
        pattern matches itself and what lies under it as a folder."""
        found = {pattern: self.values[pattern]} if pattern in self.values else {}
        below = pattern if pattern.endswith("/") else pattern + "/"
        found.update((name, self.values[name]) for name in self.starting(below))
        return found

    def starting(self, prefix: str) -> list[str]:
        """The packed names that start with ``prefix`` as a string."""
        at = bisect.bisect_left(self.names, prefix)
        end = at
        while end < len(self.names) and self.names[end].startswith(prefix):
            end += 1
        return self.names[at:end]


_NO_PACKED_REFS = _PackedRefs((0, 0, 0), {})
_PACKED: dict[str, _PackedRefs] = {}
_PACKED_LOCK = threading.Lock()
_PACKED_KEPT = 64  # repositories whose parsed packed-refs are kept


def _packed_refs(git_dir: Path) -> _PackedRefs:
    key = os.fspath(git_dir)
    try:
        with open(git_dir / "packed-refs", "rb") as handle:  # the stamp of what is read
            seen = os.fstat(handle.fileno())
            stamp = (seen.st_ino, seen.st_mtime_ns, seen.st_size)
            with _PACKED_LOCK:
                cached = _PACKED.get(key)
            if cached is not None and cached.stamp == stamp:
                return cached
            text = handle.read().decode("utf-8")
    except FileNotFoundError:
        return _NO_PACKED_REFS
    values: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line[0] in "#^":
            continue
        sha, _, name = line.partition(" ")
        if _SHA.fullmatch(sha):
            values[name] = sha
    parsed = _PackedRefs(stamp, values)
    with _PACKED_LOCK:
        if len(_PACKED) >= _PACKED_KEPT:
            _PACKED.clear()
        _PACKED[key] = parsed
    return parsed


def _ref_files(root: Path, *, below_only: bool) -> Iterable[Path]:
    """The loose ref files at ``root`` (itself, unless only what is below it is asked)."""
    if root.is_file():
        if not below_only and not root.name.endswith(".lock"):
            yield root
        return
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".lock"):
                yield Path(folder) / name


def read_ref(git_dir: Path, name: str) -> str | None:
    """The sha ``name`` points at (``HEAD`` followed when symbolic), or None."""
    git_dir = Path(git_dir)
    for _ in range(5):
        try:
            text = (git_dir / name).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return read_refs(git_dir, name).get(name)
        if text.startswith("ref: "):
            name = text[5:].strip()
            continue
        return text if _SHA.fullmatch(text) else None
    return None


def write_ref(git_dir: Path, name: str, sha: str | None) -> None:
    """Point ``name`` at ``sha`` (None deletes it) where only this process writes (a work
    tree's own repository, a forge cache's private namespace): a loose file renamed into
    place, as git writes one."""
    path = Path(git_dir) / name
    if sha is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temporary file lies outside refs/: a process killed before the rename must not
    # leave a file there that git would read as a ref (and refuse as a bad object).
    temporary = Path(git_dir) / f"assay-ref-{os.getpid()}-{threading.get_ident()}.tmp"
    temporary.write_text(sha + "\n", encoding="utf-8")
    os.replace(temporary, path)


# ---------------------------------------------------------------------------- objects


def read_blobs(git_dir: Path, wanted: Iterable[tuple[str, str]]) -> list[bytes | None]:
    """The bytes of each ``(commit, path)``; None where the commit or the path is missing
    or the path names something other than a file."""
    import pygit2

    repo = repository(git_dir)
    results: list[bytes | None] = []
    for commit, path in wanted:
        try:
            tree = repo[commit].peel(pygit2.Tree)
            entry = tree[path]
            blob = repo[entry.id]
        except (KeyError, ValueError, pygit2.InvalidSpecError):
            results.append(None)
            continue
        results.append(blob.data if isinstance(blob, pygit2.Blob) else None)
    return results


def _peeled(repo: pygit2.Repository, rev: str, kind: type[T]) -> T:
    """The ``kind`` (commit or tree) that ``rev`` names; ``ObjectMissing`` when none."""
    try:
        return cast(T, repo[rev].peel(cast(Any, kind)))
    except (KeyError, ValueError) as exc:
        raise ObjectMissing(f"{rev}: no such commit") from exc


def first_parents(git_dir: Path, tip: str, *, limit: int | None = None) -> list[str]:
    """Commits from ``tip`` back along first parents, newest first; ``ObjectMissing``."""
    import pygit2

    repo = repository(git_dir)
    commit = _peeled(repo, tip, pygit2.Commit)
    chain: list[str] = []
    while limit is None or len(chain) < limit:
        chain.append(str(commit.id))
        ids = commit.parent_ids
        if not ids:
            break
        try:
            commit = repo[ids[0]].peel(pygit2.Commit)
        except KeyError as exc:  # a shallow or broken history: say so, as rev-list would
            raise ObjectMissing(f"{ids[0]}: parent of {chain[-1]} is missing") from exc
    return chain


def tree_paths(git_dir: Path, commit: str) -> list[str]:
    """Every file path in ``commit``'s tree (``ls-tree -r --name-only``), sorted."""
    import pygit2

    repo = repository(git_dir)
    tree = _peeled(repo, commit, pygit2.Tree)
    paths: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for entry in node:
            if entry.type_str == "tree":
                walk(repo[entry.id], f"{prefix}{entry.name}/")
            elif entry.type_str == "blob":
                paths.append(f"{prefix}{entry.name}")

    walk(tree, "")
    return sorted(paths)


def tree_modes(git_dir: Path, commit: str, *, under: str) -> list[tuple[str, int]]:
    """``(path, filemode)`` of every non-folder entry below the folder ``under`` (ending in
    ``/``) of ``commit``'s tree, sorted: files, symlinks (``0o120000``) and submodules
    (``0o160000``) alike, so that a reader can refuse what is not a regular file."""
    import pygit2

    repo = repository(git_dir)
    node: Any = _peeled(repo, commit, pygit2.Tree)
    for part in [p for p in under.split("/") if p]:
        try:
            entry = node[part]
        except KeyError:
            return []
        if entry.type_str != "tree":
            return [(under.rstrip("/"), int(entry.filemode))]
        node = repo[entry.id]
    found: list[tuple[str, int]] = []

    def walk(tree: Any, prefix: str) -> None:
        for entry in tree:
            if entry.type_str == "tree":
                walk(repo[entry.id], f"{prefix}{entry.name}/")
            else:
                found.append((f"{prefix}{entry.name}", int(entry.filemode)))

    walk(node, under)
    return sorted(found)


def merged_into(git_dir: Path, tips: Iterable[str], main: str) -> list[str]:
    """The ``tips`` that are ``main`` or one of its ancestors; unknown ones are not."""
    import pygit2

    repo = repository(git_dir)
    found = []
    for tip in tips:
        try:
            if tip == main or repo.descendant_of(main, tip):
                found.append(tip)
        except (KeyError, ValueError, pygit2.GitError):
            continue  # an object this cache does not have is not merged into main
    return found


def is_commit(git_dir: Path, sha: str) -> bool:
    """Whether the full object id ``sha`` names a commit in the repository."""
    import pygit2

    try:
        return isinstance(repository(git_dir)[sha], pygit2.Commit)
    except (KeyError, ValueError):
        return False


MAX_COPIED_COMMITS = 1000  # past this, copy_objects leaves the rest to a fetch


def copy_objects(source: Path, target: Path, tips: Iterable[str]) -> int:
    """Copy into ``target`` the objects reachable from ``tips`` in ``source`` that it lacks;
    the number of commits copied.

    Contents go before what names them (blobs and subtrees before a tree, a tree and the
    parents before a commit), so a commit present in ``target`` is complete at every instant
    and a copy cut short leaves only unreachable objects. Each object is hashed afresh as it
    is written: ``target`` holds exactly the objects, never what a file in ``source`` says.
    """
    import pygit2

    src, dst = repository(source), repository(target)
    pending = list(tips)
    order: list[pygit2.Commit] = []
    seen: set[str] = set()
    while pending and len(order) <= MAX_COPIED_COMMITS:
        sha = pending.pop()
        if sha in seen or sha in dst.odb:
            continue
        seen.add(sha)
        commit = src[sha].peel(pygit2.Commit)
        order.append(commit)
        pending.extend(str(parent) for parent in commit.parent_ids)
    if len(order) > MAX_COPIED_COMMITS:
        return 0
    for commit in reversed(order):  # parents first
        _copy_tree(src, dst, commit.tree_id)
        dst.odb.write(pygit2.enums.ObjectType.COMMIT, commit.read_raw())
    return len(order)


def _copy_tree(src: pygit2.Repository, dst: pygit2.Repository, oid: pygit2.Oid) -> None:
    import pygit2

    if oid in dst.odb:
        return
    tree = src[oid].peel(pygit2.Tree)
    for entry in tree:
        if entry.type == pygit2.enums.ObjectType.TREE:
            _copy_tree(src, dst, entry.id)
        elif entry.type == pygit2.enums.ObjectType.BLOB and entry.id not in dst.odb:
            dst.odb.write(pygit2.enums.ObjectType.BLOB, src[entry.id].read_raw())
    dst.odb.write(pygit2.enums.ObjectType.TREE, tree.read_raw())


def has_path(git_dir: Path, commit: str, path: str) -> bool:
    """Whether ``commit``'s tree holds ``path``; False when the commit is unknown."""
    import pygit2

    try:
        tree = repository(git_dir)[commit].peel(pygit2.Tree)
        tree[path]
    except (KeyError, ValueError):
        return False
    return True


def extract(git_dir: Path, commit: str, folder: str, target: Path) -> bool:
    """Write the files under ``folder`` of ``commit`` below ``target`` (``target/folder/...``);
    False when the commit or the folder is not there. Paths come from git trees, which
    cannot hold ``..`` or absolute names; only blobs are written (no links)."""
    import pygit2

    repo = repository(git_dir)
    try:
        node = repo[commit].peel(pygit2.Tree)[folder]
        tree = repo[node.id]
    except (KeyError, ValueError):
        return False
    if not isinstance(tree, pygit2.Tree):
        return False

    def walk(node: Any, at: Path) -> None:
        at.mkdir(parents=True, exist_ok=True)
        for entry in node:
            if entry.type_str == "tree":
                walk(repo[entry.id], at / entry.name)
            elif entry.type_str == "blob" and entry.filemode != pygit2.enums.FileMode.LINK:
                (at / entry.name).write_bytes(repo[entry.id].read_raw())

    walk(tree, Path(target) / folder)
    return True


def signature(name: str, email: str, when: float) -> pygit2.Signature:
    import pygit2

    return pygit2.Signature(name, email, int(when), 0)


def init_bare(path: Path, *, initial_branch: str, config: Mapping[str, str]) -> None:
    """Create the bare repository ``path`` with repository-level ``config``."""
    import pygit2

    pygit2.init_repository(os.fspath(path), bare=True, initial_head=initial_branch)
    configure(path, config)


def configure(git_dir: Path, settings: Mapping[str, str]) -> None:
    """Set repository-level config (which wins over a machine's global config)."""
    config = repository(git_dir).config
    for key, value in settings.items():
        if key not in config or config[key] != value:
            config[key] = value
