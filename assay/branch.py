"""``BranchSync``: a brief's branch ``assay/<brief>`` checked out locally, pushed by CAS.

The work directory is an ordinary git repository: the desk's tools edit files in it and
the journal lives in it under ``.assay/journal/<brief>/``. At each durability point
:meth:`BranchSync.sync` commits the whole work tree, journal included, as ONE commit and
pushes it with a lease on the tip this holder last pushed (or started from). The branch
tip on the forge is therefore always a consistent checkpoint: files exactly as the
journal's last entry left them.

When the push is refused, another holder has moved the branch (it took the claim over and
pushed its ``takeover`` entry): ``Fenced`` is raised and nothing else is written. The
forge is the truth: :meth:`checkout` makes the work tree exactly the forge's tip.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import assay.refs as refs
from assay.errors import BadInput, Fenced
from assay.forge.base import Forge
from assay.ids import check_id
from assay.plumbing import GitError, Identity, RefUpdate, fetch, push, run_git

if TYPE_CHECKING:
    from assay.journal import Journal

MAIN_REF = refs.MAIN
_REMOTE = "refs/remotes/forge"
# Settings that must not come from a machine's git config when committing a checkpoint.
_COMMIT_CONFIG = {
    "core.hooksPath": "/dev/null",
    "commit.gpgSign": "false",
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "gc.auto": "0",
}


def branch_ref(brief: str) -> str:
    """``refs/heads/assay/<brief>``."""
    return refs.branch_ref(brief)


def journal_path(brief: str) -> str:
    """The journal's folder inside the work tree: ``.assay/journal/<brief>``."""
    return f".assay/journal/{check_id(brief)}"


class BranchSync:
    """The local checkout of ``assay/<brief>`` and its CAS-pushed checkpoints."""

    def __init__(self, forge: Forge, brief: str, *, workdir: Path, identity: Identity) -> None:
        self.forge = forge
        self.brief = check_id(brief)
        self.workdir = Path(workdir).resolve()
        self.identity = identity
        self.ref = branch_ref(brief)
        self.tip: str | None = None  # the CAS base: what the forge held when we last agreed
        self._checked_out = False

    @property
    def journal_dir(self) -> Path:
        return self.workdir / journal_path(self.brief)

    def _git(self, *args: str, input: bytes | None = None) -> str:
        config = {**_COMMIT_CONFIG, **self.forge.git_config}
        done = run_git(args, cwd=self.workdir, input=input, env=self.identity.env(), config=config)
        return done.stdout.decode("utf-8", "replace").strip()

    def checkout(self) -> Path:
        """Make the work directory exactly the forge's ``assay/<brief>`` (or main, when the
        branch does not exist yet) in one fetch; return the work directory."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not (self.workdir / ".git").exists():
            run_git(["init", "--quiet", f"--initial-branch=assay/{self.brief}", str(self.workdir)])
        tracking = f"{_REMOTE}/assay/{self.brief}"
        try:
            self._fetch([f"+{self.ref}:{tracking}", f"+{MAIN_REF}:{_REMOTE}/main"])
        except GitError as exc:
            if "couldn't find remote ref" not in exc.message:
                raise
            # The branch does not exist (yet, or any more): start from main. This second
            # round trip happens only on a brief's first run.
            run_git(["update-ref", "-d", tracking], cwd=self.workdir)
            try:
                self._fetch([f"+{MAIN_REF}:{_REMOTE}/main"])
            except GitError as again:
                if "couldn't find remote ref" not in again.message:
                    raise
        remote_branch = self._rev(tracking)
        base = remote_branch or self._rev(f"{_REMOTE}/main")
        if base is None:
            raise BadInput(f"forge {self.forge.display_url} has no main branch to start from")
        self._git("checkout", "--quiet", "--force", "-B", refs.branch_name(self.brief), base)
        self._git("reset", "--quiet", "--hard", base)
        self._git("clean", "--quiet", "-d", "--force")
        self.tip = remote_branch
        self._checked_out = True
        return self.workdir

    def _fetch(self, refspecs: list[str]) -> None:
        fetch(
            self.workdir / ".git",
            self.forge.url,
            refspecs,
            prune=False,
            config=self.forge.git_config,
            policy=self.forge.retry_policy,
        )

    def _rev(self, ref: str) -> str | None:
        done = run_git(
            ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            cwd=self.workdir,
            check=False,
        )
        return done.stdout.decode().strip() or None

    def head(self) -> str:
        """The local commit the work directory is at."""
        head = self._rev("HEAD")
        if head is None:
            raise GitError(f"{self.workdir}: no commit checked out")
        return head

    def commit(self, message: str) -> str | None:
        """Commit the whole work tree as one commit; None when nothing changed."""
        if not self._checked_out:
            raise GitError("BranchSync.commit before checkout()")
        self._git("add", "--all", "--", ".")
        if self.journal_dir.exists():  # the journal goes in even if a .gitignore says no
            self._git("add", "--all", "--force", "--", journal_path(self.brief))
        if not self._git("status", "--porcelain", "--untracked-files=no"):
            return None
        self._git("commit", "--quiet", "--no-verify", "--allow-empty-message", "-m", message)
        return self.head()

    def push(self) -> str:
        """CAS-push the local head over the tip this holder last pushed; ``Fenced`` if moved."""
        head = self.head()
        if head == self.tip:
            return head
        result = push(
            self.workdir / ".git",
            self.forge.url,
            [RefUpdate(self.ref, head, expected=self.tip)],
            config=self.forge.git_config,
            policy=self.forge.retry_policy,
        )
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
    ancestors = [b for sha in forge.merged_into(main) for b in by_sha.get(sha, [])]
    present = forge.has_paths([(branches[b], journal_path(b)) for b in ancestors])
    return {b for b, has_journal in zip(ancestors, present, strict=True) if has_journal}


def read_branch_journal(forge: Forge, commit: str, brief: str, into: Path) -> Journal | None:
    """The verified journal of ``brief`` in ``commit``, materialised under ``into`` without a
    checkout (``Corrupt`` when edited); None when the commit holds no journal. The one way
    a journal is read from a commit (the gate and the desks' wake check both use it)."""
    from assay.errors import Corrupt
    from assay.journal import read_journal

    prefix = journal_path(brief)
    names = forge.list_tree(commit, prefix)
    if not names:
        return None
    for name, blob in zip(names, forge.read_blobs([(commit, n) for n in names]), strict=True):
        if blob is None:
            raise Corrupt(f"{commit[:12]}:{name}: listed in the tree but unreadable")
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob)
    return read_journal(into / prefix)
