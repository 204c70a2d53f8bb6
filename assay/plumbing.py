"""The git subprocess boundary: every git command Assay runs goes through this module.

It owns four things:

* running ``git`` with a controlled environment (no prompts, C locale, no machine identity:
  every commit names its own author and committer through :class:`Identity`);
* building objects without a work tree: blobs, nested trees and commits are written as
  loose objects straight into a repository's object store (the format is git's own, so
  ``git fsck`` accepts them; no index and no checkout are involved);
* talking to a remote: ``ls-remote``, a fetch of a whole ref namespace in one round trip,
  and a compare-and-swap push (``--force-with-lease`` per ref, ``--atomic`` across refs);
* translating failures at the boundary: a push answers with a :class:`PushOutcome` per ref
  (created, fast-forward, lost race, stale, ...) rather than a boolean, a transport failure
  is retried with tenacity and then becomes :class:`~assay.errors.ForgeUnavailable`, and
  anything else git refuses becomes :class:`GitError` (an internal error: a bug or a broken
  installation). A lost race is an answer, never a transient failure, so it is never retried.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import hashlib
import logging
import os
import re
import subprocess
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from assay.errors import Denied, ForgeUnavailable, Internal, Unavailable
from assay.odb import ObjectMissing, first_parents, read_refs
from assay.odb import extract as extract_objects
from assay.odb import has_path as _has_path
from assay.odb import init_bare as init_in_process
from assay.odb import is_commit as _is_commit
from assay.odb import merged_into as _merged_into
from assay.odb import read_blobs as read_objects
from assay.odb import tree_modes as _tree_modes
from assay.odb import tree_paths as _tree_paths

LOG = logging.getLogger("assay.plumbing")

ZERO_SHA = "0" * 40
GIT_TIMEOUT_S = 120.0
STALL_S = 15  # seconds an HTTP transfer may move no bytes before git gives up on it
# (ASSAY_FORGE_STALL_SECONDS overrides it.)
_SHA_RE = re.compile(r"[0-9a-f]{40}")
_IDENTITY_BAD = re.compile(r"[<>\n\r\0]")

T = TypeVar("T")


class GitError(Internal):
    """git refused something that is neither a lost race nor a transport failure."""


class TransportError(ForgeUnavailable):
    """One attempt could not reach the remote; retried, then re-raised as unavailable."""


class PushThrottled(ForgeUnavailable):
    """The forge refused a push over its push rate (HTTP 429): nothing moved. Not retried
    by ``with_retries``; a push gate (``assay.forge.pushledger``) backs off and sends it
    again, else it is the forge's ``ForgeUnavailable`` (69)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_seconds(value: str | None) -> float | None:
    """An HTTP ``Retry-After`` in seconds (None when absent or not a number of seconds)."""
    try:
        seconds = float(value or "")
    except ValueError:
        return None
    return seconds if 0 <= seconds <= 3600 else None


class PushGate(Protocol):
    """What every push request is sent through: ``gate(send)`` calls ``send()`` (once, or
    again after a ``PushThrottled``) and returns its answer. ``send_now`` is no gate."""

    def __call__(self, send: Callable[[], T]) -> T: ...


def send_now(send: Callable[[], T]) -> T:
    """No push budget: send at once."""
    return send()


# ---------------------------------------------------------------------------- identity


@dataclass(frozen=True)
class Identity:
    """Author and committer of a commit; passed through the environment, never git config."""

    name: str
    email: str

    def __post_init__(self) -> None:
        for part in (self.name, self.email):
            if not part or _IDENTITY_BAD.search(part):
                raise GitError(f"identity part {part!r} is empty or holds <, > or a newline")

    @classmethod
    def for_holder(cls, desk: str, holder: str) -> Identity:
        """The identity of a claim holder: the desk as name, the holder token as address."""
        return cls(name=desk, email=f"{holder}@{desk}.assay.invalid")

    def signature(self, when: float | None = None) -> str:
        """``Name <email> <epoch> +0000`` as a commit object writes it."""
        stamp = int(time.time() if when is None else when)
        return f"{self.name} <{self.email}> {stamp} +0000"

    def env(self) -> dict[str, str]:
        """Environment variables naming this identity as author and committer."""
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
        }


ASSAY_IDENTITY = Identity(name="assay", email="assay@assay.invalid")


# ---------------------------------------------------------------------------- running git


def without_git_vars(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) without git's ``GIT_*`` variables: inside a git
    hook they point every git command a child runs at the hook's repository."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if not k.startswith("GIT_")}


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git child gets: no prompts, C locale, no system config."""
    env = without_git_vars()
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "LC_ALL": "C",
            "LANGUAGE": "C",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            # A connection that stalls (a reply lost by a proxy, a forge that hangs) aborts
            # after STALL_S instead of holding the desk until GIT_TIMEOUT_S: it is then a
            # transport failure, retried like any other.
            "GIT_HTTP_LOW_SPEED_LIMIT": "1",
            "GIT_HTTP_LOW_SPEED_TIME": os.environ.get("ASSAY_FORGE_STALL_SECONDS", str(STALL_S)),
        }
    )
    # Keep the machine's identity out of every object we write: a forgotten -c or env
    # would otherwise leak "root@host" into a claim commit.
    env.update(ASSAY_IDENTITY.env())
    if extra:
        env.update(extra)
    return env


def config_env(config: Mapping[str, str]) -> dict[str, str]:
    """``config`` as git's ``GIT_CONFIG_COUNT``/``_KEY_n``/``_VALUE_n`` variables (git 2.31+)."""
    env = {"GIT_CONFIG_COUNT": str(len(config))}
    for index, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def run_git(
    args: Sequence[str],
    *,
    git_dir: Path | None = None,
    cwd: Path | None = None,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, str] | None = None,
    check: bool = True,
    timeout: float = GIT_TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    """Run one git command; raise :class:`GitError` (or a transport error) when it fails.

    ``config`` values reach git through its own environment (``config_env``), never its
    command line (which every process can read in ``/proc/<pid>/cmdline``) and never
    error messages, so a forge adapter may pass credentials (an ``http.extraHeader``).
    """
    argv = ["git"]
    if config:
        env = {**(env or {}), **config_env(config)}
    if git_dir is not None:
        argv.append(f"--git-dir={git_dir}")
    argv += list(args)
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            input=input,
            env=git_env(env),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise TransportError(f"git {args[0]} timed out after {timeout:.0f} s") from exc
    except OSError as exc:  # git itself missing: nothing a retry can fix
        raise GitError(f"cannot run git: {exc}") from exc
    if check and done.returncode != 0:
        no_space_here(args, done)
        raise failure(args, done)
    return done


class NoSpace(Unavailable):
    """A local disk (the forge cache, a work tree) is full: 69, nothing was half-done."""


_LOCAL_SPACE = ("no space left on device", "disk quota exceeded")


def no_space_here(args: Sequence[str], done: subprocess.CompletedProcess[bytes]) -> None:
    """``NoSpace`` when a local git command failed for want of disk space."""
    stderr = done.stderr.decode("utf-8", "replace")
    if any(pattern in stderr.lower() for pattern in _LOCAL_SPACE):
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no space"
        raise NoSpace(f"git {args[0]}: no space left on device: {last}")


@contextlib.contextmanager
def local_disk(where: str) -> Iterator[None]:
    """A local write under ``where`` (in-process git, an object or ref file, a cache): a
    full disk is ``NoSpace`` (69), as it is for a git command. The one owner of that
    mapping: every local writer runs inside it, and the desk loop asks ``no_space_error``."""
    try:
        yield
    except Exception as exc:
        found = no_space_error(exc, where)
        if found is not None:
            raise found from exc
        raise


def no_space_error(exc: BaseException, where: str) -> NoSpace | None:
    """``NoSpace`` when ``exc`` says the disk under ``where`` is full, else None.

    An ``OSError`` says so by its errno (ENOSPC, EDQUOT). libgit2 says so in its message
    (``no space left on device``) or, for an object write, not at all (``GitError: no
    error``): a libgit2 failure while the disk under ``where`` has no free block left is
    taken for what it is.
    """
    if isinstance(exc, NoSpace):
        return exc
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return NoSpace(f"{where}: no space left on device ({exc.strerror})")
        return None
    import pygit2  # only once something failed: commands that never write skip it

    if not isinstance(exc, pygit2.GitError):
        return None
    text = str(exc).lower()
    if any(pattern in text for pattern in _LOCAL_SPACE) or _disk_full(where):
        return NoSpace(f"{where}: no space left on device: {exc}")
    return None


def _disk_full(where: str) -> bool:
    path = Path(where)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        info = os.statvfs(path)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < _FULL_BYTES


_FULL_BYTES = 64 * 1024  # less free than this under a write that failed: the disk is full


_TRANSPORT_PATTERNS = (
    "unable to access",
    "could not read from remote",
    "connection refused",
    "failed to connect",
    "couldn't connect",
    "unable to connect",
    "connection reset",
    "connection timed out",
    "operation timed out",
    "the remote end hung up",
    "early eof",
    "the requested url returned error: 5",
    "rpc failed",
    "remote error",
    "could not resolve host",
    "empty reply from server",
    "transfer closed",
    "broken pipe",
    "unexpected disconnect",
    "bytes of body are still expected",
    "bad pack header",
    "gnutls",
    "ssl",
)
_MISSING_PATTERNS = (
    "does not appear to be a git repository",
    "repository not found",
    "not found",
    "access denied or repository not exported",
    "returned error: 404",
)
# The forge wants a credential git was not given, or refused the one it was.
_DENIED_PATTERNS = (
    "could not read username",
    "authentication failed",
    "returned error: 401",
    "returned error: 403",
)
# git falls back to WebDAV pushes when an HTTP server does not speak git's smart HTTP
_NOT_GIT_PATTERNS = ("git-http-push failed",)


def failure(args: Sequence[str], done: subprocess.CompletedProcess[bytes]) -> GitError:
    """Translate a failed git run into the typed error of this boundary."""
    stderr = done.stderr.decode("utf-8", "replace").strip()
    lowered = stderr.lower()
    brief = " ".join(a for a in args[:2])
    last = stderr.splitlines()[-1] if stderr else f"exit {done.returncode}"
    if any(p in lowered for p in _DENIED_PATTERNS):
        return _Refused(
            f"git {brief}: the forge refused this request without a valid token (set "
            f"ASSAY_FORGE_TOKEN to a token from `assay forge token add`): {last}"
        )
    if any(p in lowered for p in _NOT_GIT_PATTERNS):
        return _Unreachable(f"git {brief}: not a git forge (no smart HTTP there): {last}")
    if any(p in lowered for p in _MISSING_PATTERNS):
        # A wrong URL is not transient; it still means "the forge is not reachable".
        return _Unreachable(f"git {brief}: the forge has no repository there: {last}")
    if any(p in lowered for p in _TRANSPORT_PATTERNS):
        return _Transient(f"git {brief}: {last}")
    return GitError(f"git {brief} failed (exit {done.returncode}): {stderr or last}")


_SPACE_PATTERNS = ("no space left on device", "disk quota exceeded", "unpacker error")


def out_of_space(args: Sequence[str], done: subprocess.CompletedProcess[bytes]) -> None:
    """A forge that cannot store what we send is unavailable (retried, then exit 69).

    A full disk on the forge side refuses the pack ("unpacker error"); that is the forge's
    state, not a bug here and not a lost race, and nothing was written on either side.
    """
    if done.returncode == 0:
        return
    text = (done.stdout + done.stderr).decode("utf-8", "replace").lower()
    if any(pattern in text for pattern in _SPACE_PATTERNS):
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no space"]
        raise _Transient(f"git {args[0]}: the forge cannot store the push: {last[0]}")


class _Transient(GitError):
    """Marker for a failure worth another attempt (converted to TransportError)."""


class _Unreachable(GitError):
    """Marker for a permanent reachability failure (converted to ForgeUnavailable)."""


class _Refused(GitError):
    """Marker for a forge that refused the credential (converted to Denied, 77)."""


# ---------------------------------------------------------------------------- retries


@dataclass(frozen=True)
class RetryPolicy:
    """How long transport failures are retried before the forge counts as unavailable.

    Read from ``ASSAY_FORGE_RETRIES`` (attempts, default 5) and
    ``ASSAY_FORGE_RETRY_SECONDS`` (total budget, default 30).
    """

    attempts: int = 5
    max_seconds: float = 30.0
    initial_wait: float = 0.2
    max_wait: float = 4.0

    @classmethod
    def from_env(cls) -> RetryPolicy:
        try:
            attempts = int(os.environ.get("ASSAY_FORGE_RETRIES", "5"))
            seconds = float(os.environ.get("ASSAY_FORGE_RETRY_SECONDS", "30"))
        except ValueError as exc:
            from assay.errors import BadInput

            raise BadInput(f"ASSAY_FORGE_RETRIES / ASSAY_FORGE_RETRY_SECONDS: {exc}") from exc
        return cls(attempts=max(1, attempts), max_seconds=max(0.0, seconds))


def _log_retry(what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        LOG.warning(
            "forge unreachable (%s), retrying %s (attempt %d): %s",
            type(exc).__name__,
            what,
            state.attempt_number + 1,
            exc,
        )

    return before_sleep


def with_retries(what: str, fn: Callable[[], T], *, policy: RetryPolicy | None = None) -> T:
    """Call ``fn``, retrying transport failures only; then raise ``ForgeUnavailable``."""
    policy = policy or RetryPolicy.from_env()

    def attempt() -> T:
        try:
            return fn()
        except _Transient as exc:
            raise TransportError(exc.message) from exc
        except _Unreachable as exc:
            raise ForgeUnavailable(exc.message) from exc
        except _Refused as exc:
            raise Denied(exc.message) from exc

    retrying = Retrying(
        retry=retry_if_exception_type(TransportError),
        stop=stop_after_attempt(policy.attempts) | stop_after_delay(policy.max_seconds),
        wait=wait_exponential_jitter(
            multiplier=policy.initial_wait, max=policy.max_wait, jitter=policy.initial_wait
        ),
        before_sleep=_log_retry(what),
        reraise=True,
    )
    try:
        return retrying(attempt)
    except TransportError as exc:
        raise ForgeUnavailable(
            f"{what}: forge unreachable after retries: {exc.message}", retries=policy.attempts
        ) from exc


# ---------------------------------------------------------------------------- objects


def init_bare(
    path: Path, *, initial_branch: str = "main", config: Mapping[str, str] | None = None
) -> Path:
    """Create a bare repository (idempotent: an existing one is left as it is).

    With ``config`` (a forge cache's settings) it is created and configured in process;
    without, by ``git init`` (the embedded forge, served by git's own http-backend).
    """
    if (path / "HEAD").exists() and (path / "objects").is_dir():
        return path
    path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        with local_disk(str(path)):
            init_in_process(path, initial_branch=initial_branch, config=config)
        return path
    run_git(["init", "--quiet", "--bare", f"--initial-branch={initial_branch}", str(path)])
    return path


def write_object(git_dir: Path, kind: str, body: bytes) -> str:
    """Store one loose object (``blob``, ``tree``, ``commit``) and return its sha.

    Written to a temporary name and renamed into place, as git does, so concurrent
    writers of the same object cannot produce a torn file.
    """
    header = f"{kind} {len(body)}\0".encode()
    sha = hashlib.sha1(header + body, usedforsecurity=False).hexdigest()
    target = Path(git_dir) / "objects" / sha[:2] / sha[2:]
    if target.exists():
        return sha
    tmp = target.parent / f"tmp_obj_{os.getpid()}_{uuid.uuid4().hex}"
    with local_disk(str(git_dir)):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(zlib.compress(header + body, 1))
            os.chmod(tmp, 0o444)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()  # a full disk leaves no half object behind
            raise
    return sha


def _check_path(path: str) -> list[str]:
    parts = path.split("/")
    if any(p in {"", ".", "..", ".git"} or "\0" in p for p in parts):
        raise GitError(f"path {path!r} cannot be stored in a tree")
    return parts


def write_tree(git_dir: Path, files: Mapping[str, bytes]) -> str:
    """Write blobs and nested trees for ``{"dir/file": bytes}`` and return the root tree."""
    root: dict[str, object] = {}
    for path, content in files.items():
        *dirs, leaf = _check_path(path)
        node = root
        for name in dirs:
            child = node.setdefault(name, {})
            if not isinstance(child, dict):
                raise GitError(f"path {path!r} collides with a file")
            node = child
        if leaf in node:
            raise GitError(f"path {path!r} given twice or collides with a directory")
        node[leaf] = content
    return _write_tree_node(git_dir, root)


def _write_tree_node(git_dir: Path, node: Mapping[str, object]) -> str:
    entries: list[tuple[bytes, bytes]] = []
    for name, value in node.items():
        if isinstance(value, dict):
            sha = _write_tree_node(git_dir, value)
            # git orders a directory as if its name ended with "/".
            entries.append(
                ((name + "/").encode(), b"40000 " + name.encode() + b"\0" + bytes.fromhex(sha))
            )
        else:
            assert isinstance(value, bytes)
            sha = write_object(git_dir, "blob", value)
            entries.append((name.encode(), b"100644 " + name.encode() + b"\0" + bytes.fromhex(sha)))
    entries.sort(key=lambda e: e[0])
    return write_object(git_dir, "tree", b"".join(e[1] for e in entries))


def write_commit(
    git_dir: Path,
    *,
    tree: str,
    parents: Sequence[str],
    message: str,
    author: Identity,
    committer: Identity | None = None,
    when: float | None = None,
) -> str:
    """Write a commit object naming its own author and committer; return its sha."""
    for sha in (tree, *parents):
        if not _SHA_RE.fullmatch(sha):
            raise GitError(f"{sha!r} is not an object id")
    lines = [f"tree {tree}"] + [f"parent {p}" for p in parents]
    lines.append(f"author {author.signature(when)}")
    lines.append(f"committer {(committer or author).signature(when)}")
    body = "\n".join(lines) + "\n\n" + message.rstrip("\n") + "\n"
    return write_object(git_dir, "commit", body.encode())


def read_blobs(git_dir: Path, specs: Iterable[str]) -> list[bytes | None]:
    """Read many ``<rev>:<path>`` blobs; None if missing.

    Revisions given as full object ids are read in this process (:mod:`assay.odb`);
    anything else (a ref name, an abbreviation) through one ``git cat-file --batch``.
    """
    wanted = list(specs)
    if not wanted:
        return []
    pairs = [spec.partition(":")[::2] for spec in wanted]
    if all(_SHA_RE.fullmatch(rev) for rev, _ in pairs):
        return read_objects(git_dir, pairs)
    done = run_git(
        ["cat-file", "--batch"], git_dir=git_dir, input="\n".join(wanted).encode() + b"\n"
    )
    data = done.stdout
    results: list[bytes | None] = []
    pos = 0
    for _ in wanted:
        end = data.index(b"\n", pos)
        header = data[pos:end].decode()
        pos = end + 1
        if header.endswith(" missing") or header.endswith(" ambiguous"):
            results.append(None)
            continue
        _, kind, size_text = header.split(" ")
        size = int(size_text)
        body = data[pos : pos + size]
        pos += size + 1
        results.append(body if kind == "blob" else None)
    return results


def first_parent_chain(git_dir: Path, tip: str, *, limit: int | None = None) -> list[str]:
    """Commits from ``tip`` back along first parents, newest first (read in process)."""
    try:
        return first_parents(git_dir, tip, limit=limit)
    except ObjectMissing as exc:
        raise GitError(f"rev-list {tip}: {exc}") from exc


def tree_paths(git_dir: Path, commit: str, *, under: str = "") -> list[str]:
    """Every file path of ``commit`` (under a folder ``under``), like ``ls-tree -r``."""
    try:
        return [p for p in _tree_paths(git_dir, commit) if p.startswith(under)]
    except ObjectMissing as exc:
        raise GitError(f"ls-tree {commit}: {exc}") from exc


def tree_modes(git_dir: Path, commit: str, *, under: str) -> list[tuple[str, int]]:
    """``(path, filemode)`` of every file, symlink and submodule below the folder ``under``."""
    try:
        return _tree_modes(git_dir, commit, under=under)
    except ObjectMissing as exc:
        raise GitError(f"ls-tree {commit}: {exc}") from exc


def merged_into(git_dir: Path, tips: Sequence[str], main: str) -> list[str]:
    """The ``tips`` that ``main`` contains (``for-each-ref --merged``), in order."""
    return _merged_into(git_dir, tips, main)


def has_commit(git_dir: Path, sha: str) -> bool:
    """Whether ``sha`` is a commit in the repository (``cat-file -e`` for an abbreviation)."""
    if _SHA_RE.fullmatch(sha):
        return _is_commit(git_dir, sha)
    done = run_git(["cat-file", "-e", f"{sha}^{{commit}}"], git_dir=git_dir, check=False)
    return done.returncode == 0


def has_path(git_dir: Path, commit: str, path: str) -> bool:
    """Whether ``commit``'s tree holds ``path`` (a file or a folder)."""
    return _has_path(git_dir, commit, path)


def extract_folder(git_dir: Path, commit: str, folder: str, target: Path) -> bool:
    """Write ``folder`` of ``commit`` below ``target``; False when it is not there."""
    return extract_objects(git_dir, commit, folder, target)


def local_refs(git_dir: Path, prefix: str) -> dict[str, str]:
    """``{ref: sha}`` of a repository's own refs under ``prefix`` (read from its ref files)."""
    return read_refs(git_dir, prefix)


# ------------------------------------------------------------------------- work trees
# The only git operations on a checkout that other modules may ask for, by name (a test,
# tests/test_git_owners.py, keeps raw git inside this module and assay/forge/).


def changed_files(root: Path) -> list[str]:
    """Paths (relative, POSIX) that ``git add --all`` in the work tree ``root`` would stage:
    modified, added, renamed and untracked files, not ignored or deleted ones; sorted.

    What ``git status --untracked-files=all`` reports, read by libgit2 against the index in
    this process (only files whose stat changed are hashed): the checkpoint's secret scan
    asks at every durability point of a desk holding a secret, and a ``git status`` there
    was a process each time."""
    import pygit2

    from assay.odb import repository

    found = pygit2.discover_repository(os.fspath(root))
    if found is None:
        raise GitError(f"{root}: not a git work tree")
    status = repository(Path(found)).status(untracked_files="all", ignored=False)
    flags = pygit2.enums.FileStatus
    gone = flags.WT_DELETED | flags.INDEX_DELETED
    return sorted(
        path for path, state in status.items() if state & ~gone and not state & flags.IGNORED
    )


def restore_files(worktree: Path, commit: str, *, keep: str) -> None:
    """Make every file of ``worktree`` except the folder ``keep`` what it was at ``commit``
    (index and files restored, untracked files removed)."""
    pathspec = ["--", ".", f":(exclude){keep}"]
    run_git(["restore", f"--source={commit}", "--staged", "--worktree", *pathspec], cwd=worktree)
    run_git(["clean", "-d", "--force", "--quiet", *pathspec], cwd=worktree)


def checkout_detached(
    tree: Path,
    sha: str,
    *,
    objects: Path | None = None,
    fetch_from: str | None = None,
    config: Mapping[str, str] | None = None,
) -> None:
    """A fresh work tree at ``tree`` with ``sha`` checked out (detached). Its objects are
    borrowed from the object store ``objects`` (git alternates), or ``sha`` alone is
    fetched, shallow, from the URL ``fetch_from`` with the forge's ``config``. No template:
    the gate makes one per row, and git's sample hooks were most of what it then deleted."""
    run_git(["init", "--quiet", "--template=", str(tree)], config=config)
    if objects is not None:
        (tree / ".git" / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    if fetch_from is not None:
        run_git(["fetch", "--quiet", "--depth=1", fetch_from, sha], cwd=tree, config=config)
    run_git(["checkout", "--quiet", "--detach", sha], cwd=tree)


def clone_branch(source: Path, branch: str, into: Path) -> bool:
    """A shallow clone of one ``branch`` of the local repository ``source``; False when the
    branch does not exist."""
    args = ["clone", "-q", "--depth", "1", "--branch", branch, str(source), str(into)]
    return run_git(args, check=False).returncode == 0


# ---------------------------------------------------------------------------- remote


def ls_remote(
    git_dir: Path,
    url: str,
    patterns: Sequence[str] = (),
    *,
    config: Mapping[str, str] | None = None,
    policy: RetryPolicy | None = None,
) -> dict[str, str]:
    """``{ref: sha}`` on the remote (one round trip), optionally filtered by patterns."""

    def call() -> dict[str, str]:
        done = run_git(["ls-remote", "--refs", url, *patterns], git_dir=git_dir, config=config)
        refs: dict[str, str] = {}
        for line in done.stdout.decode().splitlines():
            sha, _, name = line.partition("\t")
            refs[name] = sha
        return refs

    return with_retries(f"ls-remote {url}", call, policy=policy)


def fetch(
    git_dir: Path,
    url: str,
    refspecs: Sequence[str],
    *,
    prune: bool = True,
    negotiation_tips: Sequence[str] = (),
    config: Mapping[str, str] | None = None,
    policy: RetryPolicy | None = None,
) -> None:
    """Fetch refspecs (globs allowed) in one round trip; prune what vanished remotely.

    ``negotiation_tips`` (ref globs or commits the repository holds) limit the ``have``
    lines git offers to those tips and their ancestors, instead of every ref's; the pack
    is still complete (the server leaves out only what an acknowledged ``have`` reaches).
    """
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc"]
    if prune:
        args.append("--prune")
    args += [f"--negotiation-tip={tip}" for tip in negotiation_tips]

    def call() -> None:
        run_git([*args, url, *refspecs], git_dir=git_dir, config=config)

    with_retries(f"fetch {url}", call, policy=policy)


class PushOutcome(enum.Enum):
    """What the remote did with one ref of a push."""

    CREATED = "created"
    FAST_FORWARD = "fast_forward"
    FORCED = "forced"  # a non-fast-forward update the lease allowed
    DELETED = "deleted"
    UP_TO_DATE = "up_to_date"
    LOST_RACE = "lost_race"  # the server's ref lock saw another update land first
    STALE = "stale"  # the ref was not at the expected value when the push started
    REJECTED = "rejected"  # refused for another reason (hook, non-fast-forward, atomic sibling)

    @property
    def ok(self) -> bool:
        return self in _OK_OUTCOMES

    @property
    def lost(self) -> bool:
        """True when another writer moved the ref: the CAS failed, the ref is not ours."""
        return self in {PushOutcome.LOST_RACE, PushOutcome.STALE}


_OK_OUTCOMES = frozenset(
    {
        PushOutcome.CREATED,
        PushOutcome.FAST_FORWARD,
        PushOutcome.FORCED,
        PushOutcome.DELETED,
        PushOutcome.UP_TO_DATE,
    }
)


class _Unchecked:
    def __repr__(self) -> str:
        return "UNCHECKED"


UNCHECKED = _Unchecked()
"""``RefUpdate.expected`` value for an unconditional (non-CAS) update."""


@dataclass(frozen=True)
class RefUpdate:
    """One ref to move: to ``new`` (None deletes) if it is still at ``expected``.

    ``expected=None`` means the ref must not exist yet; :data:`UNCHECKED` skips the check.
    """

    ref: str
    new: str | None
    expected: str | _Unchecked | None = None

    def __post_init__(self) -> None:
        if not self.ref.startswith("refs/") or ".." in self.ref or " " in self.ref:
            raise GitError(f"{self.ref!r} is not a full ref name")

    def refspec(self) -> str:
        source = "" if self.new is None else self.new
        prefix = "+" if self.expected is UNCHECKED else ""
        return f"{prefix}{source}:{self.ref}"

    def lease(self) -> str | None:
        if self.expected is UNCHECKED:
            return None
        return f"--force-with-lease={self.ref}:{self.expected or ''}"


@dataclass(frozen=True)
class PushResult:
    """The outcome of one (atomic) push: overall and per ref, with git's own words."""

    outcome: PushOutcome
    refs: dict[str, PushOutcome] = field(default_factory=dict)
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    @property
    def lost(self) -> bool:
        return self.outcome.lost


def classify_line(flag: str, summary: str) -> PushOutcome:
    """The outcome of one ref from git's porcelain flag and summary: the one rule, used for
    git's own output and for a receive-pack report read in process (assay.forge.sendpack),
    which says what it was told in git's words first."""
    text = summary.lower()
    if flag == "*":
        return PushOutcome.CREATED
    if flag == " ":
        return PushOutcome.FAST_FORWARD
    if flag == "+":
        return PushOutcome.FORCED
    if flag == "-":
        return PushOutcome.DELETED
    if flag == "=":
        return PushOutcome.UP_TO_DATE
    if "stale info" in text:
        return PushOutcome.STALE
    if "atomic push failed" in text:
        return PushOutcome.REJECTED
    if "remote rejected" in text and any(
        w in text
        for w in ("lock", "failed to update ref", "expected", "is at", "incorrect old value")
    ):
        return PushOutcome.LOST_RACE
    if "fetch first" in text:
        return PushOutcome.LOST_RACE
    return PushOutcome.REJECTED


def parse_porcelain(stdout: str) -> dict[str, tuple[PushOutcome, str]]:
    """Parse ``git push --porcelain`` ref lines into ``{ref: (outcome, summary)}``."""
    refs: dict[str, tuple[PushOutcome, str]] = {}
    for line in stdout.splitlines():
        if len(line) < 2 or line[1] != "\t":
            continue
        flag, rest = line[0], line[2:]
        spec, _, summary = rest.partition("\t")
        ref = spec.rsplit(":", 1)[-1]
        refs[ref] = (classify_line(flag, summary), summary)
    return refs


def push(
    git_dir: Path,
    url: str,
    updates: Sequence[RefUpdate],
    *,
    atomic: bool = True,
    config: Mapping[str, str] | None = None,
    policy: RetryPolicy | None = None,
    gate: PushGate = send_now,
) -> PushResult:
    """Push ``updates`` as compare-and-swaps; retry only transport failures.

    An attempt whose reply is lost in transport may already have been applied; its retry
    then finds the ref at exactly our new value, which git reports as up to date (an ok
    outcome) whatever the lease said, so the push still counts as ours. Every attempt goes
    through ``gate`` (a forge's push budget); a push the forge refused over its rate
    (``HTTP 429``) is ``PushThrottled``, for the gate to send again.
    """
    if not updates:
        raise GitError("push needs at least one ref update")
    args = ["push", "--porcelain", "--no-verify"]
    if atomic and len(updates) > 1:
        args.append("--atomic")
    args += [lease for u in updates if (lease := u.lease())]
    args.append(url)
    args += [u.refspec() for u in updates]

    def send() -> subprocess.CompletedProcess[bytes]:
        done = run_git(args, git_dir=git_dir, config=config, check=False)
        said = done.stderr.decode("utf-8", "replace")
        if done.returncode != 0 and _THROTTLED.search(said):
            raise PushThrottled(f"push {url}: the forge refused the push over its rate")
        return done

    def call() -> PushResult:
        done = gate(send)
        out_of_space(args, done)
        lines = parse_porcelain(done.stdout.decode("utf-8", "replace"))
        if not lines:
            if done.returncode == 0:
                raise GitError(f"push to {url} printed no ref status")
            raise failure(args, done)
        per_ref = {
            ref: lines.get(ref, (PushOutcome.REJECTED, "no status"))[0] for ref in _refs(updates)
        }
        detail = "; ".join(f"{ref}: {summary}" for ref, (_, summary) in lines.items())
        overall = overall_outcome(per_ref)
        return PushResult(outcome=overall, refs=per_ref, detail=detail)

    return with_retries(f"push {url}", call, policy=policy)


# git's words for a smart-HTTP answer of 429 Too Many Requests (curl's, then remote-curl's).
_THROTTLED = re.compile(r"returned error: 429|HTTP 429")


def _refs(updates: Sequence[RefUpdate]) -> list[str]:
    return [u.ref for u in updates]


def overall_outcome(per_ref: Mapping[str, PushOutcome]) -> PushOutcome:
    """One push's outcome from its refs': every ref ok, else the lost race, else stale."""
    outcomes = list(per_ref.values())
    if all(o.ok for o in outcomes):
        if len(set(outcomes)) == 1:
            return outcomes[0]
        return next(o for o in outcomes if o is not PushOutcome.UP_TO_DATE)
    for wanted in (PushOutcome.LOST_RACE, PushOutcome.STALE):
        if wanted in outcomes:
            return wanted
    return PushOutcome.REJECTED
