"""The git layer of every forge: one remote URL plus a local cache of fetched objects.

A :class:`Forge` fetches ref namespaces in one round trip into a local bare *cache*
repository, reads records out of the fetched commits, writes new commits into the cache
without a work tree, and pushes compare-and-swap updates back.

Several processes on one machine may point at the same cache directory. They share its
object store (git writes objects atomically, and automatic gc is off in a cache so nothing
a peer still needs is pruned) but never its refs: each ``Forge`` instance maps the remote's
refs into a private namespace ``refs/assay-cache/<pid>-<nonce>/`` and removes it on
``close()``, so two fetches can never race on one ref lock or read each other's view.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.closing import Closing
from assay.errors import Internal
from assay.forge.batch import GitBatch
from assay.plumbing import (
    GitError,
    Identity,
    PushGate,
    PushResult,
    RefUpdate,
    RetryPolicy,
    first_parent_chain,
    has_commit,
    has_path,
    init_bare,
    local_disk,
    local_refs,
    ls_remote,
    merged_into,
    read_blobs,
    run_git,
    send_now,
    tree_modes,
    tree_paths,
    write_commit,
    write_object,
    write_tree,
)
from assay.plumbing import fetch as git_fetch
from assay.plumbing import push as git_push
from assay.refs import MAIN

if TYPE_CHECKING:
    from assay.forge.group import GroupPush, Unit
    from assay.forge.pushledger import PushLedger

CACHE_NAMESPACE = "refs/assay-cache"
MAX_NEGOTIATION_GLOBS = 32  # more refs than this are offered by folder (negotiation_tips)
# A cache keeps every object (peers may still need it) and writes no reflogs or graphs.
CACHE_CONFIG = {
    "gc.auto": "0",
    "maintenance.auto": "false",
    "fetch.writeCommitGraph": "false",
    "core.logAllRefUpdates": "false",
}


def default_cache_dir(url: str) -> Path:
    """``$ASSAY_STATE/cache/<hash>`` or ``~/.cache/assay/<hash>`` for a forge URL."""
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    state = os.environ.get("ASSAY_STATE")
    base = Path(state) / "cache" if state else Path.home() / ".cache" / "assay"
    return base / digest


def open_cache(path: Path) -> Path:
    """Create (once, under a file lock) the bare cache repository at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.parent / f".{path.name}.lock"
    with open(lock_path, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (path / "HEAD").exists():
                init_bare(path, config=CACHE_CONFIG)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return path


def negotiation_tips(wanted: Sequence[str]) -> list[str]:
    """The cache refs a fetch of ``wanted`` offers the server as ``have`` lines.

    By default git offers every ref of the cache, and peers' namespaces hold hundreds:
    sent 16, 32, 64… a round, each round one more ``upload-pack`` on a stateless server,
    and a ref created since (a root commit no ``have`` reaches) keeps the server from ever
    answering "ready" until the client has run out. The copies that any namespace holds of
    the refs asked for are the commits their new tips grow from, and ``main`` is where a
    new branch forks: offering only those ends a fetch in one request (the server is ready)
    or two (the client says done). The pack is as complete either way.

    git matches every glob against every ref of the cache, so a long list of refs is
    offered by their folders instead (``refs/assay/claims/`` for a thousand claims).
    """
    if len(wanted) > MAX_NEGOTIATION_GLOBS:
        wanted = sorted(
            {ref if ref.endswith("/") else ref.rpartition("/")[0] + "/" for ref in wanted}
        )
    return [*(f"{CACHE_NAMESPACE}/*/{ref}*" for ref in wanted), f"{CACHE_NAMESPACE}/*/{MAIN}"]


def _drop_namespace(cache: Path, namespace: str) -> None:
    """Delete a closed instance's private refs. Only that instance wrote them, so a loose
    one is a file to remove; git deletes what ``packed-refs`` still holds afterwards (a copy
    a ``git fetch`` or ``pack-refs`` put there, which a loose file may have hidden)."""
    try:
        for ref in local_refs(cache, namespace):
            (cache / ref).unlink(missing_ok=True)
        for folder, _, _ in sorted(os.walk(cache / namespace), reverse=True):
            with contextlib.suppress(OSError):  # the folders left empty, deepest first
                os.rmdir(folder)
        packed = local_refs(cache, namespace)
        if packed:
            script = "".join(f"delete {ref}\n" for ref in sorted(packed))
            run_git(["update-ref", "--stdin"], git_dir=cache, input=script.encode())
    except Exception:  # best effort at exit: the cache may already be gone
        pass


class Forge(Closing):
    """The git layer of a forge: fetch, read, commit and CAS-push against one remote.

    ``config`` is passed to every git command in its environment (for example an
    ``http.extraHeader`` with a token); it never appears in argv, messages or logs.
    """

    kind: str = "git"
    # What a desk without a ``durability:`` pushes (assay.desks.host.durability): every
    # durability point, on a forge that carries any push rate.
    default_durability: str = "step"
    # Whether only the forge's admin can move refs outside refs/heads/ (the embedded forge's
    # push rule); False where any writer may (GitHub: rulesets do not cover refs/assay/), so
    # no record there is read as a trust anchor (assay.forge.settings).
    protects_custom_refs: bool = True

    def __init__(
        self,
        url: str,
        *,
        cache_dir: Path | None = None,
        config: Mapping[str, str] | None = None,
        display_url: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.url = url
        self.display_url = display_url or url
        self._cache = open_cache(Path(cache_dir) if cache_dir else default_cache_dir(url))
        self.namespace = f"{CACHE_NAMESPACE}/{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._config = dict(config or {})
        self._retry = retry
        # The host's group push this handle pushes through (``join_group``); None: alone.
        self.group: GroupPush | None = None
        # Two threads (a heartbeat and the run) must not update one private ref at once.
        self._fetch_lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _drop_namespace, self._cache, self.namespace)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.display_url!r})"

    def close(self) -> None:
        """Drop this instance's private refs from the cache (objects stay for peers)."""
        self._finalizer()

    # ------------------------------------------------------------------ reading

    def ls_refs(self, prefix: str = "refs/") -> dict[str, str]:
        """``{ref: sha}`` of remote refs under ``prefix``, in one round trip, no objects."""
        refs = ls_remote(
            self._cache, self.url, [f"{prefix}*"], config=self._config, policy=self._retry
        )
        return {ref: sha for ref, sha in refs.items() if ref.startswith(prefix)}

    def fetch(self, refs: str | Sequence[str]) -> dict[str, str]:
        """Fetch refs into the cache in one round trip and return ``{ref: sha}`` of them.

        ``refs`` is a namespace prefix ending in ``/`` (every ref under it), or one or
        more full ref names (missing ones are simply absent from the answer).
        """
        wanted = [refs] if isinstance(refs, str) else list(refs)
        specs = [f"+{r}*:{self.namespace}/{r}*" for r in wanted]
        found: dict[str, str] = {}
        with self._fetch_lock:
            git_fetch(
                self._cache,
                self.url,
                specs,
                negotiation_tips=negotiation_tips(wanted),
                config=self._config,
                policy=self._retry,
            )
            local = {r: local_refs(self._cache, f"{self.namespace}/{r}") for r in wanted}
        for r in wanted:
            for local_ref, sha in local[r].items():
                ref = local_ref[len(self.namespace) + 1 :]
                if r.endswith("/") or ref == r:
                    found[ref] = sha
        return found

    def refresh(
        self, refs: str | Sequence[str], *, listed_only: Sequence[str] = ()
    ) -> dict[str, str]:
        """What :meth:`fetch` returns, starting ``git fetch`` only for refs that moved.

        The forge's refs are read in process (:mod:`assay.forge.lsrefs`); a ref whose tip
        the cache already holds (a peer fetched it, or this machine wrote it) is mapped into
        this instance's namespace without a fetch, and only refs whose tips are missing are
        fetched. A present commit is complete: objects reach the cache by a fetch, which
        checks connectivity before any ref points at them, or by :meth:`commit` on
        parents already there. A forge read in process cannot be (git settings only git
        understands, or the server unreachable) is fetched as before.

        Refs under ``listed_only`` are answered from the listing alone: their tips are in
        the answer, their objects are not fetched, and this instance's copies of them are
        left as they were (a desk's view needs other briefs' branch tips, not their trees:
        a tip the cache lacks is no ancestor of a main the cache holds). Whoever reads such
        a tip's objects refreshes that ref first.
        """
        from assay.forge.lsrefs import Unreachable, remote_refs
        from assay.odb import is_commit, write_ref

        wanted = [refs] if isinstance(refs, str) else list(refs)
        try:
            listed = remote_refs(
                self.url, wanted, config=self._config, display_url=self.display_url
            )
        except Unreachable:
            listed = None  # git's fetch retries and times out by the forge's policy
        if listed is None:
            return self.fetch(wanted)
        found = {
            ref: sha
            for ref, sha in listed.items()
            if any(ref == r or (r.endswith("/") and ref.startswith(r)) for r in wanted)
        }
        absent = {ref for ref, sha in found.items() if not is_commit(self._cache, sha)}
        missing = sorted(ref for ref in absent if not ref.startswith(tuple(listed_only)))
        with self._fetch_lock, local_disk(str(self._cache)):  # a full cache disk: NoSpace
            mapped: dict[str, str] = {}
            for r in wanted:
                mapped.update(local_refs(self._cache, f"{self.namespace}/{r}"))
            for local_ref in mapped:
                if local_ref[len(self.namespace) + 1 :] not in found:
                    write_ref(self._cache, local_ref, None)  # gone on the forge
            for ref, sha in found.items():
                if ref not in absent and mapped.get(f"{self.namespace}/{ref}") != sha:
                    write_ref(self._cache, f"{self.namespace}/{ref}", sha)
            if missing and self._fetched_in_process(found, missing, mapped):
                return found
        if missing:
            fetched = self.fetch(missing)
            for ref in missing:  # the fetch's answer is newer than the listing
                found.pop(ref)
                if ref in fetched:
                    found[ref] = fetched[ref]
        return found

    def _fetched_in_process(
        self, found: dict[str, str], missing: list[str], mapped: dict[str, str]
    ) -> bool:
        """Fetch the ``missing`` tips the listing named in one request
        (:mod:`assay.forge.fetchpack`) and point their refs at them; False when git must.

        The haves are what those refs grew from (this instance's last copy of each) and
        main, where a new branch forks: every one is offered at once, so the server
        answers with the pack, with no negotiation round.
        """
        from assay.forge import fetchpack
        from assay.odb import is_commit, write_ref

        before = [mapped.get(f"{self.namespace}/{ref}") for ref in missing]
        offered = [*before, found.get(MAIN), self.fetched_ref(MAIN)]
        haves = [sha for sha in offered if sha and is_commit(self._cache, sha)]
        try:
            fetchpack.fetch(
                self.url,
                self._cache,
                wants=[found[ref] for ref in missing],
                haves=haves,
                config=self._config,
                display_url=self.display_url,
            )
        except fetchpack.NeedsGit:
            return False
        for ref in missing:
            write_ref(self._cache, f"{self.namespace}/{ref}", found[ref])
        return True

    def read_blob(self, commit: str, path: str) -> bytes | None:
        """The bytes of ``path`` in a fetched commit, or None when it has no such file."""
        return read_blobs(self._cache, [f"{commit}:{path}"])[0]

    def read_blobs(self, wanted: Sequence[tuple[str, str]]) -> list[bytes | None]:
        """Many ``(commit, path)`` reads in one git process."""
        return read_blobs(self._cache, [f"{commit}:{path}" for commit, path in wanted])

    def history(self, tip: str, *, limit: int | None = None) -> list[str]:
        """Commits from ``tip`` back along first parents, newest first (already fetched)."""
        return first_parent_chain(self._cache, tip, limit=limit)

    def list_tree(self, commit: str, path: str, *, recursive: bool = True) -> list[str]:
        """The file paths under ``path`` (a folder; "" for all) in a fetched commit; [] when
        absent."""
        folder = path.rstrip("/") + "/" if path.strip("/") else ""
        if recursive:  # in process (assay.odb): no git process for the common case
            try:
                return tree_paths(self._cache, commit, under=folder)
            except GitError:
                return []
        args = ["ls-tree", "--name-only", commit, "--", folder]
        done = run_git(args, git_dir=self._cache, check=False)
        return done.stdout.decode().splitlines() if done.returncode == 0 else []

    def list_tree_modes(self, commit: str, path: str) -> list[tuple[str, int]]:
        """``(path, filemode)`` of every file, symlink and submodule under the folder
        ``path`` in a fetched commit (read in process); [] when absent."""
        try:
            return tree_modes(self._cache, commit, under=path.rstrip("/") + "/")
        except GitError:
            return []

    def has_paths(self, wanted: Sequence[tuple[str, str]]) -> list[bool]:
        """Whether each ``(commit, path)`` exists, read in process (assay.odb)."""
        return [has_path(self._cache, commit, path) for commit, path in wanted]

    def resolve_commit(self, rev: str) -> str | None:
        """The full id of a fetched commit named by ``rev`` (a prefix allowed), else None."""
        done = run_git(
            ["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            git_dir=self._cache,
            check=False,
        )
        return done.stdout.decode().strip() if done.returncode == 0 else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        """Whether fetched commit ``older`` is reachable from ``newer``."""
        done = run_git(
            ["merge-base", "--is-ancestor", older, newer], git_dir=self._cache, check=False
        )
        return done.returncode == 0

    def fetched_ref(self, ref: str) -> str | None:
        """What ``ref`` pointed at in this instance's last fetch that included it (no round
        trip); a CAS push from it is refused, never wrong, when the ref has moved since."""
        name = f"{self.namespace}/{ref}"
        return local_refs(self._cache, name).get(name)

    def has_commit(self, sha: str) -> bool:
        """Whether ``sha`` (a prefix allowed) is a commit among the fetched objects."""
        return has_commit(self._cache, sha)

    def with_objects(self, tips: Mapping[str, str | None]) -> dict[str, str | None]:
        """``tips`` (``{ref: sha or None}`` as a listing found them) with every tip's objects
        in the cache: a ref whose tip the cache lacks (a view lists other briefs' branches
        without their objects) is refreshed, and given as the forge has it now."""
        lacking = [ref for ref, sha in tips.items() if sha and not self.has_commit(sha)]
        if not lacking:
            return dict(tips)
        fresh = self.refresh(lacking)
        return {**tips, **{ref: fresh.get(ref) for ref in lacking}}

    def reached_from(self, main: str, tips: Sequence[str]) -> list[str]:
        """The ``tips`` (fetched commits) that ``main`` contains, in order, read in process."""
        return merged_into(self._cache, tips, main)

    def merge_base(self, one: str, other: str) -> str | None:
        """The best common ancestor of two fetched commits, or None when they share none."""
        done = run_git(["merge-base", one, other], git_dir=self._cache, check=False)
        return done.stdout.decode().strip() or None

    def merge_tree(self, ours: str, theirs: str) -> str | None:
        """The tree of merging two fetched commits (written into the cache), or None when
        they conflict."""
        done = run_git(
            ["merge-tree", "--write-tree", ours, theirs], git_dir=self._cache, check=False
        )
        return done.stdout.decode().split()[0] if done.returncode == 0 else None

    def tree_keeping(self, tree: str, name: str, *, like: str | None) -> str:
        """``tree`` (in the cache) with its top-level entry ``name`` exactly as commit
        ``like`` has it: replaced by ``like``'s, or removed when ``like`` (or None) has none.
        Written in process (libgit2); the new tree's sha."""
        import pygit2

        import assay.odb as odb

        repo = odb.repository(self._cache)
        builder = repo.TreeBuilder(repo[tree].peel(pygit2.Tree))
        if builder.get(name) is not None:
            builder.remove(name)
        source = repo[like].peel(pygit2.Tree) if like is not None else None
        if source is not None and name in source:
            entry = source[name]
            builder.insert(name, entry.id, entry.filemode)
        return str(builder.write())

    def tree_entries(
        self, commit: str, path: str = "", *, recursive: bool = True
    ) -> list[tuple[str, str, str]]:
        """``(mode, kind, path)`` of the entries of a fetched commit's tree (under the folder
        ``path`` when given), like ``ls-tree -z``."""
        args = ["ls-tree", *(["-r"] if recursive else []), "-z", commit]
        done = run_git([*args, *([path] if path else [])], git_dir=self._cache)
        entries = []
        for item in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
            if item:
                meta, _, name = item.partition("\t")
                mode, kind = meta.split(" ")[:2]
                entries.append((mode, kind, name))
        return entries

    def parent_lists(self, tip: str) -> list[tuple[str, list[str]]]:
        """Every commit reachable from ``tip`` with its parents, oldest first."""
        done = run_git(["rev-list", "--parents", "--reverse", tip], git_dir=self._cache)
        lines = [line.split() for line in done.stdout.decode().splitlines()]
        return [(sha, parents) for sha, *parents in lines]

    def batch(self) -> GitBatch:
        """One in-process reader over the fetched objects (a context manager)."""
        return GitBatch(self._cache)

    @property
    def objects_dir(self) -> Path:
        """The cache's object store, for a checkout that borrows its objects (alternates)."""
        return self._cache.resolve() / "objects"

    @property
    def state_dir(self) -> Path:
        """Where Assay keeps local state about this forge (parsed-record caches, wake logs,
        the evidence tips a gate saw): the cache repository's folder, which git ignores."""
        return self._cache

    # ------------------------------------------------------------------ writing

    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob in the cache; its sha."""
        return write_object(self._cache, "blob", data)

    def commit_tree(
        self, tree: str, *, parents: Sequence[str], message: str, author: Identity
    ) -> str:
        """Write a commit of an existing ``tree`` into the cache; return its sha."""
        return write_commit(self._cache, tree=tree, parents=parents, message=message, author=author)

    def tree_with(self, base: str | None, path: str, data: bytes) -> str:
        """The tree of commit ``base`` (empty when None) with ``path`` set to ``data``."""
        blob = self.write_blob(data)
        handle, index = tempfile.mkstemp(prefix="assay-index-")
        os.close(handle)
        os.unlink(index)  # git wants to create the index file itself
        env = {"GIT_INDEX_FILE": index}
        try:
            if base is not None:
                run_git(["read-tree", base], git_dir=self._cache, env=env)
            run_git(
                ["update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"],
                git_dir=self._cache,
                env=env,
            )
            done = run_git(["write-tree"], git_dir=self._cache, env=env)
        finally:
            Path(index).unlink(missing_ok=True)
        return done.stdout.decode().strip()

    def commit(
        self,
        files: Mapping[str, bytes],
        *,
        parents: Sequence[str],
        message: str,
        author: Identity,
        committer: Identity | None = None,
    ) -> str:
        """Write a commit whose tree is exactly ``files`` into the cache; return its sha."""
        tree = write_tree(self._cache, files)
        return write_commit(
            self._cache,
            tree=tree,
            parents=parents,
            message=message,
            author=author,
            committer=committer,
        )

    def push(self, updates: Sequence[RefUpdate], *, atomic: bool = True) -> PushResult:
        """Push CAS updates of commits in the cache; see :func:`assay.plumbing.push`."""
        return self._push(self._cache, updates, atomic=atomic)

    def join_group(self) -> GroupPush:
        """Push through this host's group from now on (:mod:`assay.forge.group`): every
        atomic push of this handle goes out with the other pushers' pending units, in one
        push per round. A desk process joins; other commands push alone."""
        if self.group is None:
            from assay.forge.group import GroupPush

            self.group = GroupPush.for_forge(self)
        return self.group

    def unit(self, git_dir: Path, *, key: str) -> Unit:
        """A standing unit of this host's group (joined here) for commits in ``git_dir``:
        what a desk's run offers after each local commit (:class:`assay.forge.group.Unit`)."""
        return self.join_group().unit(git_dir, key=key, hidden=self._fetched_below)

    def push_alone(self, git_dir: Path, updates: Sequence[RefUpdate]) -> PushResult:
        """An atomic CAS push of commits in ``git_dir`` by this handle alone, outside its
        group (the group's own path for a push with nothing to carry, and its fallback for
        a unit no round could send)."""
        return self._push(git_dir, updates, atomic=True, alone=True)

    def push_from(self, git_dir: Path, updates: Sequence[RefUpdate]) -> PushResult:
        """Push CAS updates of commits in another repository (a work tree whose objects
        include the cache's) to this forge, with its settings and retry policy.

        What the forge accepted is copied into the cache too (:func:`assay.odb.copy_objects`),
        so the next read of those refs on this machine (the gate's view of the branch a desk
        just pushed, the next checkout) finds their tips at hand and starts no fetch.
        """
        result = self._push(git_dir, updates, atomic=True)
        if result.ok:
            self.keep_pushed(git_dir, [u.new for u in updates if u.new is not None])
        return result

    def keep_pushed(self, git_dir: Path, tips: Sequence[str]) -> None:
        """Copy commits of ``git_dir`` the forge now holds into the cache (a shortcut for
        the next read of their refs here; a group's unit that landed calls it too)."""
        import pygit2

        from assay.odb import copy_objects

        # Only a shortcut: a later read fetches whatever the cache still lacks.
        with contextlib.suppress(pygit2.GitError, KeyError, ValueError, OSError):
            copy_objects(git_dir, self._cache, tips)

    def _push(
        self, git_dir: Path, updates: Sequence[RefUpdate], *, atomic: bool, alone: bool = False
    ) -> PushResult:
        """Through the host's group when this handle joined one (``alone``: not), else in
        process where :mod:`assay.forge.sendpack` can (one POST over smart HTTP, the
        forge's receive-pack alone over ``file://``), else by ``git push``; the outcomes are
        the same either way."""
        from assay.forge import sendpack

        if self.group is not None and not alone and (atomic or len(updates) == 1):
            grouped = self.group.push(git_dir, updates, hidden=self._fetched_below)
            if grouped is not None:
                return grouped
        try:
            result = sendpack.push(
                self.url,
                git_dir,
                updates,
                atomic=atomic,
                config=self._config,
                display_url=self.display_url,
                hidden=lambda: self._fetched_below(updates),
                policy=self._retry,
                gate=self.push_gate,
            )
        except sendpack.NeedsGit:
            result = None  # nothing moved; git reads the refs and negotiates what to send
        if result is not None:
            return result
        # git push needs every pushed commit locally, even one only asserted where it is (a
        # branch tip a view listed without fetching it).
        self.with_objects({u.ref: u.new for u in updates if u.new == u.expected})
        from assay.odb import is_commit

        missing = [u for u in updates if u.new is not None and not is_commit(git_dir, u.new)]
        if missing:  # git would fail and be retried as an unreachable forge, five times
            first = missing[0]
            raise Internal(
                f"push {first.ref}: commit {first.new} is not in {git_dir} (nothing was sent; "
                "a push names a commit this machine wrote or fetched)"
            )
        return git_push(
            git_dir,
            self.url,
            updates,
            atomic=atomic,
            config=self._config,
            policy=self._retry,
            gate=self.push_gate,
        )

    def _fetched_below(self, updates: Sequence[RefUpdate]) -> list[str]:
        """Commits the forge holds (with their history) that the pushed ones grow from, as
        this instance last fetched them: its copies of the pushed refs, and main (a branch
        forks from main). Not every ref it ever fetched: with 500 briefs that was 2,500
        ref files read, and as many commits hidden from the walk, at every push."""
        from assay.odb import read_ref

        names = [f"{self.namespace}/{ref}" for ref in [*(u.ref for u in updates), MAIN]]
        return sorted({sha for name in names if (sha := read_ref(self._cache, name))})

    def running(self, workflow_runs: Collection[int]) -> frozenset[int]:
        """Of these CI workflow runs (named by claims whose lease lapsed), the ones the
        forge says still run: none on a forge without CI runs, where leases alone judge."""
        return frozenset()

    @property
    def push_gate(self) -> PushGate:
        """What every push request to this forge is sent through: at once here; a forge
        with a push budget its client keeps to (GitHub) returns its ledger
        (:mod:`assay.forge.pushledger`)."""
        return send_now

    # A merge waits at most this many budget windows for its turn (then ForgeUnavailable).
    MERGE_WAIT_WINDOWS = 10

    def wait_charge(self, what: str) -> Callable[[float], None] | None:
        """What a push or merge budget's wait for ``what`` is counted against before it is
        waited (``PushLedger(charge=...)``): nothing here, where the ledger's own
        ``max_wait_s`` bounds each wait; a forge whose client caps every wait of one
        command (GitHub's REST client) counts it there, so REST, push and merge waits
        together stay under the job's timeout."""
        return None

    def merges_per_minute(self) -> int:
        """The merges the gate makes a minute on this forge (0: unlimited): its settings
        record's ``merges_per_minute`` (a ``github:`` forge: one a minute unless set)."""
        from assay.forge.settings import read_settings

        return read_settings(self).merges_per_minute

    def merge_gate(self, send: Callable[[], PushResult]) -> PushResult:
        """Send one merge push (``send()``: main moved, with what moves with it) within the
        forge's merge budget: at once without one, else through the host's merge ledger
        (:class:`~assay.forge.pushledger.PushLedger` in a file of its own), which waits for
        room and gives the place back when the push moved nothing (a lost race)."""
        limit = self.merges_per_minute()
        if not limit:
            return send()
        from assay.forge.budget import window_from_env
        from assay.forge.pushledger import PushLedger

        window = window_from_env()
        ledger = self.merge_ledger
        if ledger is None or (ledger.limit, ledger.window) != (limit, window):
            ledger = PushLedger(
                self.state_dir.parent / f"{self.state_dir.name}.merge-ledger.json",
                limit=limit,
                window=window,
                name=self.display_url,
                max_wait_s=window * self.MERGE_WAIT_WINDOWS,
                noun="merge",
                charge=self.wait_charge(f"merge to {self.display_url}"),
            )
            self.merge_ledger = ledger
        return ledger(send, counts=lambda result: result.ok)

    merge_ledger: PushLedger | None = None  # this handle's merge ledger (its stats), if any

    def before_main_moves(self, top: str, *, key: Any = None) -> list[RefUpdate]:
        """What a push that moves main to ``top`` (a commit the gate built and verified)
        needs first, and the updates to carry with it. Nothing here; a forge whose rules
        judge such a push by the commit's own checks (GitHub) publishes them first."""
        return []

    @property
    def git_config(self) -> dict[str, str]:
        """The git settings this forge passes to git (for callers with their own repo);
        ``run_git`` puts them in git's environment, never on its command line."""
        return dict(self._config)

    @property
    def retry_policy(self) -> RetryPolicy | None:
        return self._retry
