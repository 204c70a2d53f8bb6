"""Reading what the gate needs out of the forge: refs, the brief on main, a clean tree.

The gate's refs are the read model's one-brief read (``assay.forgestate.source.
read_snapshot(only_brief=...)``, one round trip: main, the brief's branch, journal ref, run
refs, review, claim, events, holdout and evidence refs); the brief is parsed from main
(never from the branch under review); the journal is read from the checkpoint whose code
is the head (``checkpoint_for``: the journal ref, else, once merged, the run ref that kept
it); and the head is checked out into a fresh temporary repository that borrows the
cache's objects, so the gate's own state is out of the rows' way.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import assay.refs as refs
from assay.briefs import Brief, load_briefs, parse_brief
from assay.claims.record import CLAIM_FILE, parse_record
from assay.errors import BadInput, Failed
from assay.evidence.reviews import ReviewRecord, read_review_at, reviews_ref
from assay.evidence.store import evidence_ref
from assay.forge import Forge
from assay.forge.records import chain
from assay.ids import check_id
from assay.journal import Journal, read_journal
from assay.plumbing import checkout_detached

MAIN_REF = refs.MAIN


def branch_ref(brief: str) -> str:
    return refs.branch_ref(brief)


def claim_ref(brief: str) -> str:
    return refs.claim_ref(brief)


def events_ref(brief: str) -> str:
    return refs.events_ref(brief)


def holdout_ref(brief: str) -> str:
    return refs.holdout_ref(brief)


def journal_ref(brief: str) -> str:
    return refs.journal_ref(brief)


def journal_path(brief: str) -> str:
    return f".assay/journal/{check_id(brief)}"


# What the code of a checkpoint leaves out: the run's journal and Assay's other files.
ASSAY_FOLDER = ".assay"


@dataclass(frozen=True)
class ForgeView:
    """The refs of one brief as one fetch saw them."""

    brief: str
    main: str | None
    branch: str | None
    review: ReviewRecord | None
    evidence: str | None
    claim: str | None
    events: str | None = None  # the brief's events log (its approvals), as the fetch found it
    holdout: str | None = None  # the brief's holdout rows (sealed), as the fetch found it
    journal: str | None = None  # the brief's checkpoints (journal ref), as the fetch found it
    runs: Mapping[str, str] = field(default_factory=dict)  # its run refs -> their tips

    @property
    def run(self) -> str | None:
        """The tip of its newest run ref (a merged run's checkpoints, kept), or None."""
        from assay.forgestate.snapshot import newest_runs

        return newest_runs(self.runs).get(self.brief, (None, 0))[0]

    @property
    def head(self) -> str | None:
        """The review's current head: the branch tip (what would merge), else the record's."""
        if self.branch:
            return self.branch
        return self.review.head_sha if self.review else None


def fetch_view(forge: Forge, brief: str) -> ForgeView:
    """Every ref the gate reads for ``brief``, in one round trip: the read model's one-brief
    read. Its records are decoded here again by the gate's own strict readers (the review
    now; the claim, evidence, events and holdout by their callers): the gate fails closed
    on a record the read model would only mark invalid."""
    from assay.forgestate.source import read_snapshot

    snapshot = read_snapshot(
        forge, only_brief=brief, journals=False, briefs=False, extra_briefs=False
    )
    found = snapshot.refs
    return ForgeView(
        brief=brief,
        main=found.get(MAIN_REF),
        branch=found.get(branch_ref(brief)),
        review=read_review_at(forge, brief, found.get(reviews_ref(brief))),
        evidence=found.get(evidence_ref(brief)),
        claim=found.get(claim_ref(brief)),
        events=found.get(events_ref(brief)),
        holdout=found.get(holdout_ref(brief)),
        journal=found.get(journal_ref(brief)),
        runs={ref: sha for ref, sha in found.items() if ref.startswith(refs.runs_of(brief))},
    )


def load_brief(forge: Forge, main: str | None, brief_id: str) -> Brief:
    """The brief ``brief_id`` as main has it (``briefs/<id>.md``, else any brief file)."""
    if main is None:
        raise BadInput(f"{MAIN_REF}: the forge has no main branch, so no brief {brief_id!r}")
    path = f"briefs/{brief_id}.md"
    data = forge.read_blob(main, path)
    if data is not None:
        try:
            brief = parse_brief(data.decode("utf-8"), source=path)
        except UnicodeDecodeError as exc:
            raise BadInput(f"{path}: not UTF-8 text ({exc.reason})") from None
        if brief.id == brief_id:
            return brief
    names = forge.list_tree(main, "briefs", recursive=False)
    blobs = forge.read_blobs([(main, name) for name in names])
    files = {name: blob for name, blob in zip(names, blobs, strict=True) if blob is not None}
    briefs = load_briefs(files)
    if brief_id in briefs:
        return briefs[brief_id]
    # Briefs from GitHub issues live beside briefs/ on main; the issue is the gate's source
    # then, read through the API as the desk read it.
    extra = getattr(forge, "extra_briefs", None)
    if extra is not None:
        issues, _bad = extra()
        if brief_id in issues:
            found: Brief = issues[brief_id]
            return found
    raise BadInput(f"briefs/: main ({main[:12]}) has no brief with id {brief_id!r}")


def claim_desks(forge: Forge, claim: str | None, *, brief: str) -> frozenset[str]:
    """The desk and holder names in the brief's claim record (whose rows never count).

    Decoded by the claims owner's strict decoder: a record it refuses is ``Corrupt`` for
    this brief (so nothing of it merges), never read leniently as "no desk"."""
    if claim is None:
        return frozenset()
    record = parse_record(forge.read_blob(claim, CLAIM_FILE), ref=claim_ref(brief), sha=claim)
    return frozenset(name for name in (record.desk, record.holder) if name)


def has_commit(forge: Forge, sha: str) -> bool:
    return forge.has_commit(sha)


def resolve_commit(forge: Forge, sha: str) -> str:
    """The full id of ``sha`` (a prefix allowed) in the fetched objects; ``BadInput`` if unknown."""
    found = forge.resolve_commit(sha)
    if found is None:
        raise BadInput(
            f"--sha: {sha!r} is not a commit fetched from the forge's refs for this brief"
        )
    return found


def is_ancestor(forge: Forge, older: str, newer: str) -> bool:
    return forge.is_ancestor(older, newer)


class CleanTree:
    """A fresh checkout of one commit in a temporary directory, removed on exit."""

    def __init__(self, forge: Forge, sha: str, *, parent: Path | None = None) -> None:
        self.forge = forge
        self.sha = sha
        self.parent = parent
        self.path = Path()

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix="assay-verify-", dir=self.parent))
        checkout_detached(self.path, self.sha, objects=self.forge.objects_dir)
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def journal_from_commit(forge: Forge, sha: str, brief: str, into: Path) -> Journal:
    """The journal of ``brief`` at ``sha``, materialised under ``into`` without a checkout
    (``assay.branch.read_branch_journal``; an absent journal reads as empty)."""
    from assay.branch import read_branch_journal

    return read_branch_journal(forge, sha, brief, into) or read_journal(into / journal_path(brief))


def same_code(forge: Forge, checkpoint: str, code: str) -> bool:
    """Whether ``checkpoint``'s tree is ``code``'s but for ``.assay`` (the journal)."""
    return forge.tree_keeping(checkpoint, ASSAY_FOLDER, like=code) == forge.tree_keeping(
        code, ASSAY_FOLDER, like=code
    )


def checkpoint_for(forge: Forge, view: ForgeView, head: str) -> str:
    """The commit whose journal speaks for code commit ``head``: the journal ref's tip (once
    merged and that ref gone, the run ref's) when its code is the head's; the head itself
    when it holds the journal (a run written before the journal ref); else, for an older
    head (``verify --sha``), the newest checkpoint on that chain whose code it is.
    ``Failed`` when no checkpoint has that code."""
    brief = view.brief
    tip = view.journal or view.run
    if tip is not None and same_code(forge, tip, head):
        return tip
    if tip is None or forge.has_paths([(head, journal_path(brief))])[0]:
        return head  # the journal rides on the branch (or there is none: an empty journal)
    with forge.batch() as reader:
        checkpoints = chain(reader, journal_ref(brief), tip, None)
    for link in reversed(checkpoints):  # the newest first
        if same_code(forge, link.commit, head):
            return link.commit
    raise Failed(
        f"{brief}: no checkpoint on {journal_ref(brief)} holds the code of {head[:12]}: "
        "the branch and its journal disagree"
    )
