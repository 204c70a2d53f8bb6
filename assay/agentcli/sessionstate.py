"""A CLI's session state in the run's checkpoints, for its native resume.

At each conversation turn the desk copies the CLI's session files (its profile's
``NativeResume.files``, under the private HOME it gave the CLI) into the work tree, where
the durability point that follows commits them with the files the CLI's tools wrote and the
journal: one checkpoint holds all three, consistent. A resumed run restores the work tree
and the session files of that checkpoint and relaunches the CLI with its own resume
(``assay.desks.kinds.cli``).

In the work tree (never on the brief's branch: a code commit keeps ``.assay`` as main has
it)::

    .assay/cli/<brief>/point.json       the resume point
    .assay/cli/<brief>/home/<path>      each session file, by its path under HOME

``point.json``: ``{"v": 1, "profile": P, "session": ID, "at": POS, "files": {path:
"sha256:…"}}``: the journal position of the turn the files lead to (the CLI resumed on them
sends that turn's request first), and each file's hash.

What crosses from the CLI's HOME (which the sandboxed CLI writes) is checked as data: only
regular files whose paths match the profile's globs are read (never through a symlink,
never a FIFO or device, each bounded), and every withheld value (the run's gateway token,
the desk's secrets) is replaced by ``[redacted]`` before a byte reaches the work tree. A
session database (``NativeResume.databases``: OpenCode's SQLite) is read as a consistent
copy and redacted through SQL (``assay.agentcli.sessiondb``). A
point read back from a checkpoint is validated the same way (paths inside HOME and matching
the globs, regular files, each hash) before a file is written into the fresh HOME of the
resumed CLI; a point that fails is not used (the run is relaunched and replayed instead).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from assay.agentcli.resume import NativeResume
from assay.agentcli.sessiondb import DatabaseRefused, database_copy, redacted_database
from assay.branch import cli_state_path
from assay.journal.redact import REDACTED

POINT = "point.json"
HOME_FOLDER = "home"
VERSION = 1
MAX_FILE = 256 << 20  # the most one session file may hold (a journal segment's bound)
MAX_FILES = 2_000  # session files of one CLI
MAX_POINT = 1 << 20  # point.json


class StateRefused(ValueError):
    """A session file or point that is not what the desk records (a link, too big, ...)."""


@dataclass(frozen=True)
class ResumePoint:
    """Where a natively resumed CLI starts: the session ``session`` of ``profile``, whose
    files lead to the request at journal position ``at``."""

    profile: str
    session: str
    at: int
    files: dict[str, str]  # path under HOME -> "sha256:<hex>"

    def to_json(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "profile": self.profile,
            "session": self.session,
            "at": self.at,
            "files": dict(sorted(self.files.items())),
        }


def state_folder(tree: Path, brief: str) -> Path:
    """``<tree>/.assay/cli/<brief>``."""
    return tree / cli_state_path(brief)


# ---------------------------------------------------------------- the CLI's HOME side


def session_files(home: Path, resume: NativeResume) -> dict[str, bytes]:
    """The session files under ``home`` (by path relative to it), read as data: regular
    files matching ``resume.files`` only, none through a link; ``StateRefused`` past the
    bounds."""
    patterns = [_glob(p) for p in resume.files]
    databases = [_glob(p) for p in resume.databases]
    found: dict[str, bytes] = {}
    for relative in _walk(home):
        if any(p.fullmatch(relative) for p in patterns):
            if len(found) >= MAX_FILES:
                raise StateRefused(f"more than {MAX_FILES} session files under {home}")
            if any(p.fullmatch(relative) for p in databases):
                data = _database(home, relative)
            else:
                data = _read_regular(home, relative)
            if data is not None and relative.endswith(".jsonl") and not data.endswith(b"\n"):
                data = data[: data.rfind(b"\n") + 1]  # a line the CLI is writing now
            if data is not None:
                found[relative] = data
    return found


def _database(home: Path, relative: str) -> bytes | None:
    """The session database ``home/relative``, a consistent copy (``database_copy``)."""
    try:
        return database_copy(lambda path: _read_regular(home, path), relative)
    except DatabaseRefused as refused:
        raise StateRefused(f"{relative}: {refused}") from None


def covers(files: dict[str, bytes], resume: NativeResume, call_ids: Iterable[str]) -> bool:
    """Whether ``files`` record the result of every tool call of ``call_ids`` (a CLI that
    writes its session behind its requests; always True when the profile says it does
    not)."""
    if not resume.result:
        return True
    return all(any(resume.recorded(i) in data for data in files.values()) for i in call_ids)


def capture(
    files: dict[str, bytes],
    *,
    tree: Path,
    brief: str,
    profile: str,
    session: str,
    at: int,
    withheld: Sequence[str],
    previous: ResumePoint | None = None,
    databases: Sequence[str] = (),
) -> ResumePoint:
    """Record ``files`` (``session_files``) in the work tree as the resume point ``at``:
    each withheld value redacted (in the files matching the ``databases`` globs, through
    SQL), files unchanged since the ``previous`` capture left as they are, files gone
    removed, ``point.json`` written last; ``DatabaseRefused`` before anything is written
    when a database cannot be redacted."""
    if (tree / ".assay").is_symlink():  # the journal's own folder: never replaced here
        raise StateRefused(".assay is a link")
    known = previous.files if previous is not None else {}
    folder = cli_state_path(brief)
    home = tree / folder / HOME_FOLDER
    redacted = _all_redacted(files, withheld, [_glob(p) for p in databases])
    hashes: dict[str, str] = {}
    for relative, data in redacted.items():
        hashes[relative] = _sha(data)
        target = home / relative
        if known.get(relative) == hashes[relative] and not target.is_symlink():
            continue
        parent = PurePosixPath(f"{folder}/{HOME_FOLDER}/{relative}").parent
        _write(_own_folder(tree, str(parent)) / target.name, data)
    for stale in sorted(_walk(home), reverse=True) if home.is_dir() else []:
        if stale not in hashes:
            (home / stale).unlink()
    _prune_empty(home)
    point = ResumePoint(profile=profile, session=session, at=at, files=hashes)
    text = json.dumps(point.to_json(), indent=1, sort_keys=True) + "\n"
    _write(_own_folder(tree, folder) / POINT, text.encode("utf-8"))
    return point


# ------------------------------------------------------------------ the resumed side


def load_point(tree: Path, brief: str, resume: NativeResume, *, profile: str) -> ResumePoint:
    """The resume point the work tree's checkpoint holds, validated (module docstring);
    ``FileNotFoundError`` when it holds none, ``StateRefused`` when it is not one."""
    raw = _read_regular(tree, f"{cli_state_path(brief)}/{POINT}", bound=MAX_POINT, missing_ok=False)
    try:
        value = json.loads(raw or b"")
    except ValueError as exc:
        raise StateRefused(f"{POINT}: not JSON ({exc})") from None
    if not isinstance(value, dict) or value.get("v") != VERSION:
        raise StateRefused(f"{POINT}: not a version {VERSION} resume point")
    at, session, files = value.get("at"), value.get("session"), value.get("files")
    if not isinstance(at, int) or isinstance(at, bool) or at < 1:
        raise StateRefused(f"{POINT}: field at is not a journal position")
    if not isinstance(session, str) or not re.fullmatch(r"[A-Za-z0-9._-]{0,100}", session):
        raise StateRefused(f"{POINT}: field session is not a session id")
    if not isinstance(files, dict) or not files or len(files) > MAX_FILES:
        raise StateRefused(f"{POINT}: field files does not list the session files")
    if value.get("profile") != profile:
        raise StateRefused(f"{POINT}: recorded for the {value.get('profile')!r} profile")
    patterns = [_glob(p) for p in resume.files]
    for relative, digest in files.items():
        where = f"{POINT}: files[{relative!r}]"
        if not isinstance(relative, str) or not isinstance(digest, str):
            raise StateRefused(f"{where}: not a path and a hash")
        parts = PurePosixPath(relative).parts
        if relative.startswith("/") or ".." in parts or "\\" in relative or not parts:
            raise StateRefused(f"{where}: not a path inside HOME")
        if not any(p.fullmatch(relative) for p in patterns):
            raise StateRefused(f"{where}: not one of the profile's session files")
    return ResumePoint(profile=profile, session=session, at=at, files=dict(files))


def restore(point: ResumePoint, *, tree: Path, brief: str, home: Path) -> None:
    """Write the point's session files into ``home`` (fresh, the desk's), each read as a
    regular file and checked against its hash first (``StateRefused``)."""
    source = f"{cli_state_path(brief)}/{HOME_FOLDER}"
    contents: dict[str, bytes] = {}
    for relative, digest in point.files.items():
        data = _read_regular(tree, f"{source}/{relative}", missing_ok=False)
        if data is None or _sha(data) != digest:
            raise StateRefused(f"session file {relative}: its hash is not the point's")
        contents[relative] = data
    for relative, data in contents.items():
        target = home / relative
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        descriptor = os.open(target, flags, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)


def point_commit(git_dir: Path, tip: str, brief: str, *, limit: int = 100_000) -> str:
    """The checkpoint at which the resume point of ``tip`` was captured: the oldest of the
    commits back from ``tip`` that hold the same ``point.json``. The checkpoints after it
    (a side request, a tool step) may hold files a tool of the next turn had half written;
    the point's own holds the files as the session files have them."""
    import pygit2

    from assay import odb

    path = f"{cli_state_path(brief)}/{POINT}"
    repo = odb.repository(git_dir)
    commit = repo[tip].peel(pygit2.Commit)
    wanted = _entry_id(commit, path)
    found = str(commit.id)
    for _ in range(limit):
        if not commit.parent_ids:
            break
        try:
            parent = repo[commit.parent_ids[0]].peel(pygit2.Commit)
        except KeyError:
            break  # a shallow history: the oldest commit we have is the answer
        if _entry_id(parent, path) != wanted:
            break
        commit, found = parent, str(parent.id)
    return found


# -------------------------------------------------------------------------- helpers


def _entry_id(commit: Any, path: str) -> str | None:
    try:
        return str(commit.tree[path].id)
    except KeyError:
        return None


def _glob(pattern: str) -> re.Pattern[str]:
    """A path glob: ``*`` and ``?`` within a folder, ``**`` across folders (a whole
    segment: any number of folders, or at the end any path below)."""
    parts = PurePosixPath(pattern).parts
    out = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out += ".+" if last else "(?:[^/]+/)*"
            continue
        segment = "".join(
            "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in part
        )
        out += segment + ("" if last else "/")
    return re.compile(out)


def _walk(root: Path) -> Iterator[str]:
    """Paths (relative, posix) of the regular-looking files below ``root``, never following
    a link (a link is listed, and refused when read)."""
    if not root.is_dir() or root.is_symlink():
        return
    stack = [""]
    while stack:
        prefix = stack.pop()
        with contextlib.suppress(OSError), os.scandir(root / prefix) as entries:
            for entry in entries:
                relative = f"{prefix}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    stack.append(relative + "/")
                else:
                    yield relative


def _read_regular(
    root: Path, relative: str, *, bound: int = MAX_FILE, missing_ok: bool = True
) -> bytes | None:
    """The bytes of the regular file ``root/relative``, no folder below ``root`` on its way
    a link, opened without following a link and without blocking on a FIFO; None for
    something that is not a regular file (or is missing, when ``missing_ok``);
    ``StateRefused`` past ``bound``."""
    where = relative
    path = root / relative
    folder = root
    for part in PurePosixPath(relative).parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            raise StateRefused(f"{where}: a folder on its path is a link")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    except OSError:  # ELOOP: a link
        if missing_ok:
            return None
        raise StateRefused(f"{where}: not a regular file") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            if missing_ok:
                return None
            raise StateRefused(f"{where}: not a regular file")
        if info.st_size > bound:
            raise StateRefused(f"{where}: {info.st_size} bytes, over the {bound} allowed")
        data = handle.read(bound + 1)
    if len(data) > bound:
        raise StateRefused(f"{where}: over the {bound} bytes allowed")
    return data


def _own_folder(root: Path, relative: str) -> Path:
    """``root/relative`` as a folder of the desk's: each folder on the way made, and one
    that is not a folder (a link a forged checkpoint held) replaced by one, so what the
    desk writes there stays there."""
    folder = root
    for part in PurePosixPath(relative).parts:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        if not folder.exists():
            folder.mkdir()
    return folder


def _write(path: Path, data: bytes) -> None:
    """Write ``path`` whole, by a scratch file renamed over it, neither through a link."""
    scratch = path.with_name(path.name + ".assay-tmp")
    with contextlib.suppress(FileNotFoundError):
        scratch.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(scratch, flags, 0o644), "wb") as handle:
        handle.write(data)
    os.replace(scratch, path)  # a link at ``path`` is replaced, never followed


def _all_redacted(
    files: dict[str, bytes], withheld: Sequence[str], databases: Sequence[re.Pattern[str]]
) -> dict[str, bytes]:
    redacted = {}
    for relative, data in files.items():
        if any(p.fullmatch(relative) for p in databases):
            redacted[relative] = redacted_database(data, withheld, where=relative)
        else:
            redacted[relative] = _redacted(data, withheld)
    return redacted


def _redacted(data: bytes, withheld: Sequence[str]) -> bytes:
    for value in withheld:
        if value:
            data = data.replace(value.encode("utf-8"), REDACTED.encode("utf-8"))
    return data


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _prune_empty(root: Path) -> None:
    if not root.is_dir():
        return
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()
