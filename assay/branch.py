"""``BranchSync``: a brief's branch ``assay/<brief>`` checked out locally, pushed by CAS.

The work directory is an ordinary git repository: the desk's tools edit files in it and
the journal lives in it under ``.assay/journal/<brief>/``. At each durability point
:meth:`BranchSync.sync` commits the whole work tree, journal included, as ONE commit and
pushes it with a lease on the tip this holder last pushed (or started from). The branch
tip on the forge is therefore always a consistent checkpoint: files exactly as the
journal's last entry left them.

When the push is refused, another holder has moved the branch (it took the claim over and
pushed its ``takeover`` entry): ``Fenced`` is raised and nothing else is written. The
forge is the truth: :meth:`checkout` makes the work tree exactly the forge's tip, unless
asked to resume local commits (``local=True``: a desk whose durability mode pushes less
than every commit, restarted on the same machine) and the work directory's own branch
holds commits on top of that tip: then exactly those local commits, and the first push
carries them, CAS on the forge's tip as always.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import assay.odb as odb
import assay.refs as refs
from assay.errors import BadInput, Fenced
from assay.forge.base import Forge
from assay.ids import check_id
from assay.plumbing import GitError, Identity, RefUpdate, local_disk

if TYPE_CHECKING:
    from assay.journal import Journal

MAIN_REF = refs.MAIN
_REMOTE = "refs/remotes/forge"
REGULAR_MODES = frozenset({0o100644, 0o100755})  # a journal holds files, nothing else
# Repository settings that must not come from a machine's git config when the work tree is
# staged and checked out (a repository's own config wins over the global one).
_WORKDIR_CONFIG = {
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "core.filemode": "true",
    "gc.auto": "0",
}


def branch_ref(brief: str) -> str:
    """``refs/heads/assay/<brief>``."""
    return refs.branch_ref(brief)


def journal_path(brief: str) -> str:
    """The journal's folder inside the work tree: ``.assay/journal/<brief>``."""
    return f".assay/journal/{check_id(brief)}"


class BranchSync:
    """The local checkout of ``assay/<brief>`` and its CAS-pushed checkpoints.

    The work directory's repository borrows the forge cache's objects (``alternates``), so
    a checkout is one fetch into the cache and a checkpoint is staged, written and committed
    in this process (libgit2, against the work tree's index, so only changed files are
    hashed); the push is the one git process of a durability point.
    """

    def __init__(self, forge: Forge, brief: str, *, workdir: Path, identity: Identity) -> None:
        self.forge = forge
        self.brief = check_id(brief)
        self.workdir = Path(workdir).resolve()
        self.identity = identity
        self.ref = branch_ref(brief)
        self.tip: str | None = None  # the CAS base: what the forge held when we last agreed
        self.resumed_locally = False  # checked out at local commits ahead of the forge's tip
        self._checked_out = False

    @property
    def journal_dir(self) -> Path:
        return self.workdir / journal_path(self.brief)

    @property
    def git_dir(self) -> Path:
        return self.workdir / ".git"

    def checkout(
        self, *, known: Mapping[str, str | None] | None = None, local: bool = False
    ) -> Path:
        """Make the work directory exactly the forge's ``assay/<brief>`` (or main, when the
        branch does not exist yet) in one fetch; return the work directory.

        ``known``: ``{branch ref: sha or None, "refs/heads/main": sha}`` as a fetch of this
        forge handle already brought them into the cache (the desk loop's view, whose branch
        tip the claim's own atomic push asserted): then no fetch is made, unless the view
        only listed the branch (its tip's objects are then fetched).

        ``local``: resume the work directory's own commits when they are ahead of the
        forge's tip (``resumed_locally`` then says so); otherwise the forge's tip wins.
        """
        found: Mapping[str, str | None] = (
            self.forge.with_objects(known)
            if known is not None
            else self.forge.refresh([self.ref, MAIN_REF])
        )
        remote_branch = found.get(self.ref)
        base = remote_branch or found.get(MAIN_REF)
        if base is None:
            raise BadInput(f"forge {self.forge.display_url} has no main branch to start from")
        with local_disk(str(self.workdir)):
            ahead = self._local_ahead(remote_branch, found.get(MAIN_REF)) if local else None
            self._check_out(ahead or base)
        self.resumed_locally = ahead is not None
        from assay.journal.files import check_tree

        check_tree(self.workdir, journal_path(self.brief))  # Corrupt: a link, a FIFO...
        odb.write_ref(self.git_dir, f"{_REMOTE}/main", found.get(MAIN_REF))
        odb.write_ref(self.git_dir, f"{_REMOTE}/assay/{self.brief}", remote_branch)
        self.tip = remote_branch
        self._checked_out = True
        return self.workdir

    def _local_ahead(self, remote: str | None, main: str | None) -> str | None:
        """The work directory's own branch head when it is ahead of the forge: a descendant
        of the forge's tip (or, with no branch on the forge yet, a commit on top of main's
        history) whose tree holds the brief's journal. None otherwise: the forge wins."""
        if not (self.git_dir / "HEAD").exists():
            return None
        local = odb.read_ref(self.git_dir, refs.branch_ref(self.brief))
        if local is None or local == remote:
            return None
        import pygit2

        self._init()
        try:
            repo = odb.repository(self.git_dir)
            commit = repo[local].peel(pygit2.Commit)
            if remote is not None:
                ahead = repo.descendant_of(commit.id, pygit2.Oid(hex=remote))
            else:
                ahead = main is not None and repo.merge_base(commit.id, main) is not None
            holds = journal_path(self.brief) + "/000001.jsonl" in commit.tree
        except (KeyError, ValueError, pygit2.GitError):
            return None  # a local branch whose objects are gone: the forge's tip then
        return local if ahead and holds else None

    def _check_out(self, base: str) -> None:
        """The work tree, index and local branch exactly at commit ``base``."""
        self._init()
        import pygit2

        repo = odb.repository(self.git_dir)
        target = repo[base].peel(pygit2.Commit)
        strategy = pygit2.enums.CheckoutStrategy
        # FORCE: the forge is the truth, local edits go; REMOVE_UNTRACKED: what ``git clean
        # -d --force`` removed (ignored files stay, as they did).
        flags = strategy.FORCE | strategy.REMOVE_UNTRACKED
        repo.checkout_tree(target.tree, strategy=flags)  # type: ignore[no-untyped-call]
        local = refs.branch_ref(self.brief)
        odb.write_ref(self.git_dir, local, base)
        (self.git_dir / "HEAD").write_text(f"ref: {local}\n", encoding="utf-8")
        repo.index.read(True)
        repo.index.read_tree(target.tree)
        repo.index.write()

    def _init(self) -> None:
        """A repository in the work directory whose objects include the forge cache's."""
        import pygit2

        self.workdir.mkdir(parents=True, exist_ok=True)
        if not (self.git_dir / "HEAD").exists():
            odb.forget(self.git_dir)
            pygit2.init_repository(str(self.workdir), initial_head=f"assay/{self.brief}")
        alternates = self.git_dir / "objects" / "info" / "alternates"
        cache_objects = str(self.forge.objects_dir)
        known = alternates.read_text().split("\n") if alternates.exists() else []
        if cache_objects not in known:
            alternates.parent.mkdir(parents=True, exist_ok=True)
            alternates.write_text("\n".join([*filter(None, known), cache_objects]) + "\n")
            odb.forget(self.git_dir)
        odb.configure(self.git_dir, _WORKDIR_CONFIG)

    def head(self) -> str:
        """The local commit the work directory is at."""
        head = (
            odb.read_ref(self.git_dir, "HEAD")
            if self._checked_out or self.git_dir.exists()
            else None
        )
        if head is None:
            raise GitError(f"{self.workdir}: no commit checked out")
        return head

    def commit(self, message: str) -> str | None:
        """Commit the whole work tree as one commit; None when nothing changed.

        Staged like ``git add --all`` (``.gitignore`` honoured) plus the journal even when
        ignored, against the work tree's index: only files whose stat changed are hashed.
        """
        if not self._checked_out:
            raise GitError("BranchSync.commit before checkout()")
        with local_disk(str(self.workdir)):
            return self._commit(message)

    def _commit(self, message: str) -> str | None:
        import pygit2

        repo = odb.repository(self.git_dir)
        index = repo.index
        index.read(False)
        index.add_all()
        journal = journal_path(self.brief)
        if self.journal_dir.exists() and repo.path_is_ignored(journal + "/000001.jsonl"):
            for path in sorted(self.journal_dir.rglob("*")):
                if path.is_file():
                    index.add(path.relative_to(self.workdir).as_posix())
        index.write()
        tree = index.write_tree()
        parent = self.head()
        if repo[parent].peel(pygit2.Commit).tree_id == tree:
            return None
        when = time.time()
        author = odb.signature(self.identity.name, self.identity.email, when)
        commit = repo.create_commit(
            None, author, author, message.rstrip("\n") + "\n", tree, [parent]
        )
        odb.write_ref(self.git_dir, refs.branch_ref(self.brief), str(commit))
        return str(commit)

    def push(self) -> str:
        """CAS-push the local head over the tip this holder last pushed; ``Fenced`` if moved."""
        head = self.head()
        if head == self.tip:
            return head
        result = self.forge.push_from(self.git_dir, [RefUpdate(self.ref, head, expected=self.tip)])
        if result.lost:
            raise Fenced(
                f"push of assay/{self.brief} refused: the branch moved past "
                f"{(self.tip or 'nothing')[:12]} (another holder took over)",
                brief=self.brief,
            )
        if not result.ok:
            raise GitError(f"push of assay/{self.brief} refused: {result.detail}")
        self.tip = head
        return head

    def sync(self, message: str) -> str:
        """One durability point: commit everything (if changed) and CAS-push; the new tip."""
        self.commit(message)
        return self.push()


def merged_branches(forge: Forge, branches: dict[str, str], main: str) -> set[str]:
    """Briefs whose branch's journal reached main, in two git calls for any number.

    A branch only just created from main is an ancestor of main too, so "merged" also
    asks that the branch tip holds the brief's journal (the run's work).
    """
    if not branches:
        return set()
    by_sha: dict[str, list[str]] = {}
    for brief, tip in branches.items():
        by_sha.setdefault(tip, []).append(brief)
    reached = forge.reached_from(main, list(by_sha))
    ancestors = [b for sha in reached for b in by_sha[sha]]
    holds = forge.has_paths([(branches[b], journal_path(b)) for b in ancestors])
    return {b for b, held in zip(ancestors, holds, strict=True) if held}


def read_branch_journal(forge: Forge, commit: str, brief: str, into: Path) -> Journal | None:
    """The verified journal of ``brief`` in ``commit``, materialised under ``into`` without a
    checkout (``Corrupt`` when edited); None when the commit holds no journal. The one way
    a journal is read from a commit (the gate and the desks' wake check both use it)."""
    from assay.errors import Corrupt
    from assay.journal import read_journal
    from assay.journal.files import MAX_FILE_BYTES

    prefix = journal_path(brief)
    entries = forge.list_tree_modes(commit, prefix)
    if not entries:
        return None
    for name, mode in entries:
        # A symlink would be written as a file of its target's name (harmless here), but a
        # checkout of the same commit follows it: refuse it for every reader alike.
        if mode not in REGULAR_MODES:
            kind = {0o120000: "a symlink", 0o160000: "a submodule"}.get(mode, f"mode {mode:o}")
            raise Corrupt(f"{commit[:12]}:{name}: {kind}, not a regular file", where=name)
    names = [name for name, _ in entries]
    for name, blob in zip(names, forge.read_blobs([(commit, n) for n in names]), strict=True):
        if blob is None:
            raise Corrupt(f"{commit[:12]}:{name}: listed in the tree but unreadable")
        if len(blob) > MAX_FILE_BYTES:
            raise Corrupt(
                f"{commit[:12]}:{name}: over the {MAX_FILE_BYTES} bytes a journal file may hold"
            )
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob)
    return read_journal(into / prefix)
