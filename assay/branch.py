"""``BranchSync``: a brief's checkpoints, pushed by CAS to two refs at once.

The work directory is an ordinary git repository: the desk's tools edit files in it and
the journal lives in it under ``.assay/journal/<brief>/``. At each durability point
:meth:`BranchSync.commit` commits the whole work tree, journal included, as ONE checkpoint
commit (the chain ``refs/assay/journal/<brief>`` holds on the forge), and derives from it
the code commit the branch ``assay/<brief>`` (the review) holds: the checkpoint's tree with
``.assay`` as main has it, a new commit only when that tree changed, so a model call moves
the journal ref alone and the review's diff against main names only the brief's code.

:meth:`BranchSync.push` moves both refs in ONE atomic push, each with a lease on the tip
this holder last pushed (or started from). The checkpoint on the forge is therefore always
consistent (files exactly as the journal's last entry left them) and the branch is always
its code. When the push is refused, another holder has moved a ref (it took the claim over
and pushed its ``takeover`` entry): ``Fenced`` is raised and nothing at all is written. The
forge is the truth: :meth:`checkout` makes the work tree exactly the forge's checkpoint,
unless asked to resume local commits (``local=True``: a desk whose durability mode pushes
less than every commit, restarted on the same machine) and the work directory's own branch
holds commits on top of that checkpoint: then exactly those local commits, and the first
push carries them, CAS on the forge's tips as always.

A forge whose branches still carry their journals (runs written before the journal ref)
is read as it is: with no journal ref, the branch's tip is the checkpoint.
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
    from assay.forgestate.source import SnapshotBackend
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


# What a code commit keeps as main has it: the run's journal and Assay's other files.
ASSAY_FOLDER = ".assay"


def journal_path(brief: str) -> str:
    """The journal's folder inside the work tree: ``.assay/journal/<brief>``."""
    return f".assay/journal/{check_id(brief)}"


def cli_state_path(brief: str) -> str:
    """An agent CLI's session state inside the work tree: ``.assay/cli/<brief>``
    (``assay.agentcli.sessionstate``); checkpointed with the journal, never on the branch."""
    return f".assay/cli/{check_id(brief)}"


class BranchSync:
    """The local checkout of a brief's checkpoints and their CAS-pushed refs.

    ``tip`` is the branch (code) tip and ``checkpoint`` the journal ref's tip as this holder
    last agreed with the forge: the two CAS bases of every push.

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
        self.journal_ref = refs.journal_ref(brief)
        self.tip: str | None = None  # the branch's CAS base: the code the forge holds
        self.checkpoint: str | None = None  # the journal ref's CAS base
        self.resumed_locally = False  # checked out at local commits ahead of the forge's tip
        self._checked_out = False
        self._assay_like: str | None = None  # whose ``.assay`` a code commit keeps: main's

    @property
    def journal_dir(self) -> Path:
        return self.workdir / journal_path(self.brief)

    @property
    def git_dir(self) -> Path:
        return self.workdir / ".git"

    def checkout(
        self, *, known: Mapping[str, str | None] | None = None, local: bool = False
    ) -> Path:
        """Make the work directory exactly the forge's checkpoint of the brief (or main,
        when the brief has no branch yet) in one fetch; return the work directory.

        ``known``: ``{branch ref: sha or None, journal ref: sha or None, "refs/heads/main":
        sha}`` as a fetch of this forge handle already brought them into the cache (the desk
        loop's view, whose tips the claim's own atomic push asserted): then no fetch is made,
        unless the view only listed them (their objects are then fetched).

        ``local``: resume the work directory's own commits when they are ahead of the
        forge's checkpoint (``resumed_locally`` then says so); otherwise the forge wins.
        """
        wanted = [self.ref, self.journal_ref, MAIN_REF]
        if known is not None and self.journal_ref not in known:
            known = {**known, **self.forge.refresh([self.journal_ref])}
        found: Mapping[str, str | None] = (
            self.forge.with_objects(known) if known is not None else self.forge.refresh(wanted)
        )
        main = found.get(MAIN_REF)
        remote_branch = found.get(self.ref)
        remote_journal = found.get(self.journal_ref)
        # The branch is the run's anchor: a journal ref without it is a deleted branch's
        # leftover, replaced (CAS on it) by a run that starts from main again.
        checkpoint = (remote_journal or remote_branch) if remote_branch else None
        base = checkpoint or main
        if base is None:
            raise BadInput(f"forge {self.forge.display_url} has no main branch to start from")
        code = remote_branch or main
        with local_disk(str(self.workdir)):
            ahead = self._local_ahead(checkpoint, main) if local else None
            self._check_out(ahead or base)
            local_code = self._local_code(code) if ahead else None
        self.resumed_locally = ahead is not None
        from assay.journal.files import check_tree

        check_tree(self.workdir, journal_path(self.brief))  # Corrupt: a link, a FIFO...
        odb.write_ref(self.git_dir, f"{_REMOTE}/main", main)
        odb.write_ref(self.git_dir, f"{_REMOTE}/assay/{self.brief}", remote_branch)
        odb.write_ref(self.git_dir, f"{_REMOTE}/journal/{self.brief}", remote_journal)
        odb.write_ref(self.git_dir, refs.workdir_code_ref(self.brief), local_code or code)
        self.tip = remote_branch
        self.checkpoint = remote_journal
        self._assay_like = main
        self._checked_out = True
        return self.workdir

    def _local_ahead(self, remote: str | None, main: str | None) -> str | None:
        """The work directory's own branch head when it is ahead of the forge: a descendant
        of the forge's checkpoint (or, with no branch on the forge yet, a commit on top of
        main's history) whose tree holds the brief's journal. None otherwise: the forge wins."""
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

    def _local_code(self, remote: str | None) -> str | None:
        """The work directory's own code head when it grows from the forge's (``remote``):
        the code commits its local checkpoints derived. None otherwise."""
        local = odb.read_ref(self.git_dir, refs.workdir_code_ref(self.brief))
        if local is None or remote is None or local == remote:
            return None
        import pygit2

        try:
            repo = odb.repository(self.git_dir)
            grows = repo.descendant_of(pygit2.Oid(hex=local), pygit2.Oid(hex=remote))
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return local if grows else None

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
        """The local checkpoint the work directory is at."""
        head = (
            odb.read_ref(self.git_dir, "HEAD")
            if self._checked_out or self.git_dir.exists()
            else None
        )
        if head is None:
            raise GitError(f"{self.workdir}: no commit checked out")
        return head

    def code_head(self) -> str:
        """The local code commit: what the branch holds once the local checkpoint is pushed."""
        if not self._checked_out:
            raise GitError("BranchSync.code_head before checkout()")
        with local_disk(str(self.workdir)):
            return self._code_for(self.head())

    def recover(self, message: str) -> str | None:
        """Commit, before ``checkout``, what a process killed between a journal line's fsync
        and its checkpoint left in the work directory (its last lines and the files they
        describe) as a local checkpoint, so that ``checkout(local=True)`` resumes it; None
        when there is no repository there or nothing changed. The caller scans it first."""
        if not (self.git_dir / "HEAD").exists() or odb.read_ref(self.git_dir, "HEAD") is None:
            return None
        with local_disk(str(self.workdir)):
            return self._commit(message)

    def commit(self, message: str) -> str | None:
        """Commit the whole work tree as one checkpoint (and its code commit, if the code
        changed); the checkpoint, or None when nothing changed.

        Staged like ``git add --all`` (``.gitignore`` honoured) plus the journal even when
        ignored, against the work tree's index: only files whose stat changed are hashed.
        """
        if not self._checked_out:
            raise GitError("BranchSync.commit before checkout()")
        with local_disk(str(self.workdir)):
            checkpoint = self._commit(message)
            if checkpoint is not None:
                self._code_for(checkpoint)
            return checkpoint

    def _commit(self, message: str) -> str | None:
        import pygit2

        repo = odb.repository(self.git_dir)
        index = repo.index
        index.read(False)
        index.add_all()
        # The run's own folders ride in every checkpoint even where .gitignore hides them.
        owned = (
            (journal_path(self.brief), "000001.jsonl"),
            (cli_state_path(self.brief), "point.json"),
        )
        for folder, probe in owned:
            root = self.workdir / folder
            if root.exists() and repo.path_is_ignored(f"{folder}/{probe}"):
                for path in sorted(root.rglob("*")):
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

    def _code_for(self, checkpoint: str) -> str:
        """The code commit of ``checkpoint``: the local code head when its tree is the
        checkpoint's without the run's ``.assay``, else a new commit on top of it (written
        to the work directory's code ref). Derived again at every push, so a code ref a
        crash left behind its checkpoint is caught up, never pushed stale."""
        import pygit2

        repo = odb.repository(self.git_dir)
        code_ref = refs.workdir_code_ref(self.brief)
        current = odb.read_ref(self.git_dir, code_ref) or self._assay_like
        if current is None:
            raise GitError(f"{self.workdir}: no code commit to derive a checkpoint's from")
        source = repo[checkpoint].peel(pygit2.Commit)
        builder = repo.TreeBuilder(source.tree)
        if builder.get(ASSAY_FOLDER) is not None:
            builder.remove(ASSAY_FOLDER)
        like = repo[self._assay_like].peel(pygit2.Tree) if self._assay_like else None
        if like is not None and ASSAY_FOLDER in like:
            entry = like[ASSAY_FOLDER]
            builder.insert(ASSAY_FOLDER, entry.id, entry.filemode)
        tree = builder.write()
        if repo[current].peel(pygit2.Commit).tree_id == tree:
            return current
        commit = repo.create_commit(
            None, source.author, source.committer, source.message, tree, [current]
        )
        odb.write_ref(self.git_dir, code_ref, str(commit))
        return str(commit)

    def push(self) -> str:
        """CAS-push the local checkpoint and its code over the tips this holder last
        pushed, both in one atomic push; ``Fenced`` (nothing written) if either moved.
        Returns the branch's (code) tip."""
        head = self.head()
        code = self.code_head()
        if head == self.checkpoint and code == self.tip:
            return code
        result = self.forge.push_from(
            self.git_dir,
            [
                RefUpdate(self.ref, code, expected=self.tip),
                RefUpdate(self.journal_ref, head, expected=self.checkpoint),
            ],
        )
        if result.lost:
            raise Fenced(
                f"push of assay/{self.brief} refused: the branch or its journal moved past "
                f"{(self.tip or 'nothing')[:12]}/{(self.checkpoint or 'nothing')[:12]} "
                "(another holder took over)",
                brief=self.brief,
            )
        if not result.ok:
            raise GitError(f"push of assay/{self.brief} refused: {result.detail}")
        self.tip, self.checkpoint = code, head
        return code

    def sync(self, message: str) -> str:
        """One durability point: commit everything (if changed) and CAS-push; the branch's
        new (code) tip."""
        self.commit(message)
        return self.push()


def merged_branches(
    forge: SnapshotBackend,
    branches: dict[str, str],
    main: str,
    journals: Mapping[str, str] | None = None,
) -> set[str]:
    """Briefs whose branch's work reached main (a fast-forward: the gate's squash merges are
    told by the review record instead), in process for any number.

    A branch only just created from main is an ancestor of main too, so "merged" also asks
    that the branch tip is the run's work: a code commit (not an ancestor of the brief's
    checkpoints, ``journals``: brief -> journal ref tip, whose objects the cache holds) or,
    for a run written before the journal ref, a commit holding the brief's journal.
    """
    if not branches:
        return set()
    journals = journals or {}
    by_sha: dict[str, list[str]] = {}
    for brief, tip in branches.items():
        by_sha.setdefault(tip, []).append(brief)
    reached = forge.reached_from(main, list(by_sha))
    ancestors = [b for sha in reached for b in by_sha[sha]]
    found: set[str] = set()
    legacy = [b for b in ancestors if b not in journals]
    holds = forge.has_paths([(branches[b], journal_path(b)) for b in legacy])
    found |= {b for b, held in zip(legacy, holds, strict=True) if held}
    for brief in ancestors:
        journal = journals.get(brief)
        if journal is None or not forge.has_commit(journal):
            continue  # checkpoints this cache lacks: not told merged (the review says it)
        if not forge.reached_from(journal, [branches[brief]]):
            found.add(brief)  # a code commit the checkpoints do not contain: the run's work
    return found


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
