"""The gate: ``verify`` re-runs a brief's rows on the review's head; ``merge`` obeys the rule.

``verify`` checks out the head in a clean tree, reads and checks the desk's journal there,
computes the environment fingerprint, runs every row (``assay.evidence.rows``: each in a
pinned tree of its own, through ``assay.evidence.runner``), appends
one record per row to the evidence ref, regenerates the claimed-versus-verified table in
the review, and reports the merge rule's verdict at that head.

``merge`` re-reads everything, checks the evidence and the journal, applies the merge rule
at the review's *current* head (the branch: the brief's code), and moves main to one squash
commit of it with one atomic compare-and-swap push (main, the run's checkpoints kept under
its run ref, the review marked merged, and the branch and its journal pinned at what was
judged). The journal is read from the checkpoint whose code is the head
(``assay.evidence.source.checkpoint_for``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.desks.records.events import EventLog
from assay.errors import Busy, Corrupt, Failed
from assay.evidence.anchors import ClaimAnchors, check_anchors, read_claim_anchors
from assay.evidence.claimed import Claimed, claimed_from_entries, journal_anchors
from assay.evidence.fingerprint import declaration_problems, diff_fingerprints, fingerprint
from assay.evidence.holdout import SealedRow
from assay.evidence.holdout import read_rows as read_holdout
from assay.evidence.keys import GateKey, PublicKey, signing_key
from assay.evidence.pinning import PinPlan, apply_pins, plan_for
from assay.evidence.records import EvidenceRecord
from assay.evidence.reviews import reviews_ref, stage_version
from assay.evidence.rows import record_template, run_brief_rows, run_row_specs
from assay.evidence.rule import MergeDecision, decide
from assay.evidence.runner import (
    gate_sandbox,
    row_environment,
    shield_gate_process,
)
from assay.evidence.source import (
    MAIN_REF,
    CleanTree,
    ForgeView,
    branch_ref,
    checkpoint_for,
    claim_desks,
    fetch_view,
    has_commit,
    is_ancestor,
    journal_from_commit,
    journal_ref,
    load_brief,
    resolve_commit,
)
from assay.evidence.spec import EnvDecl, RowSpec, env_decl, protect_globs, row_specs
from assay.evidence.store import EvidenceLog, append_records, default_verifier, read_log
from assay.evidence.table import render_markdown, with_table
from assay.evidence.trust import gate_trust, merge_key, reader_key, refuse_other_signers
from assay.forge import Forge
from assay.forge.records import LostRace, Stage, WritePolicy, refuse_on_loss, write
from assay.journal import Journal
from assay.plumbing import PushResult, RefUpdate
from assay.refs import holdout_ref, run_ref
from assay.runtime.types import Event
from assay.sandbox import SandboxSpec
from assay.sandbox.environ import process_environment

MERGE_ATTEMPTS = 5  # a merge (or a batch) judged again after this many lost races: Busy


@dataclass
class VerifyReport:
    """What one ``verify`` run did and concluded."""

    brief: str
    head_sha: str
    decision: MergeDecision
    fingerprint: dict[str, str]
    desk_fingerprint: dict[str, str] | None
    env_problems: list[str] = field(default_factory=list)
    ran: list[EvidenceRecord] = field(default_factory=list)
    review_updated: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    pins: PinPlan | None = None
    notes: list[str] = field(default_factory=list)  # what the review says about the pins

    @property
    def passed(self) -> bool:
        return self.decision.allowed and not self.env_problems

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.passed else "failed",
            "code": 0 if self.passed else 1,
            "brief": self.brief,
            "head_sha": self.head_sha,
            "passed": self.passed,
            "env_fingerprint": self.fingerprint,
            "desk_env_fingerprint": self.desk_fingerprint,
            "env_problems": self.env_problems,
            "decision": self.decision.to_json(),
            "ran": [r.to_json() for r in self.ran],
            "review_updated": self.review_updated,
            "pinned": self.pins.pinned if self.pins else [],
            "pinned_from": self.pins.base if self.pins else None,
            "unpinned": list(self.pins.unpinned) if self.pins else [],
            "notes": self.notes,
        }


def _require_commit(forge: Forge, sha: str, brief_id: str) -> None:
    if not has_commit(forge, sha):
        raise Failed(
            f"{brief_id}: the review's head {sha[:12]} is not on the forge "
            f"(its branch {branch_ref(brief_id)} is gone)"
        )


def check_journal_anchors(
    forge: Forge, records: Sequence[EvidenceRecord], journal: Journal, head: str
) -> None:
    """``Corrupt`` when the journal at ``head`` no longer holds a head an older record saw.

    Every record carries the journal head at the commit it verified. When that commit is
    ``head`` or an ancestor of it, the journal only grew since, so the hash must still be in
    it; a journal rewritten wholesale (chain recomputed) after the fact fails here.
    """
    anchors = journal_anchors(journal.entries, journal.head)
    ancestry: dict[str, bool] = {head: True}
    for record in records:
        if not record.journal_head:
            continue
        if record.head_sha not in ancestry:
            ancestry[record.head_sha] = is_ancestor(forge, record.head_sha, head)
        # The journal only grows: on its own ref it moves at every model call while the
        # code (the head) stays, so a record made at this very commit holds an older head.
        if ancestry[record.head_sha] and record.journal_head not in anchors:
            raise Corrupt(
                f"journal at {head[:12]}: the journal head {record.journal_head} recorded at "
                f"{record.head_sha[:12]} is gone: the journal was rewritten"
            )


@dataclass(frozen=True)
class GateContext:
    """What the gate reads of one brief before it judges or runs anything: its refs, its
    rows and environment from main, its desks, evidence log, claim anchors and holdout rows
    (``merge`` and ``assay.evidence.batch`` share it)."""

    view: ForgeView
    rows: list[RowSpec]
    env: EnvDecl
    desks: frozenset[str]
    log: EvidenceLog
    anchors: ClaimAnchors
    protect: tuple[str, ...] | None = None
    approval: list[Event] | None = None  # the brief's events when it needs approval
    title: str = ""  # the brief's title: the squash commit's subject
    holdout: list[SealedRow] = field(default_factory=list)  # rows the desk never sees
    declared_holdout: tuple[str, ...] = ()  # the holdout row ids the brief requires

    @property
    def all_rows(self) -> list[RowSpec]:
        """The brief's rows and its holdout rows, as the merge rule judges them."""
        return [*self.rows, *(row.spec() for row in self.holdout)]

    def holdout_problems(self) -> list[str]:
        """One line per holdout row the brief requires that the holdout ref does not hold."""
        present = {row.id for row in self.holdout}
        where = holdout_ref(self.view.brief)
        return [
            f"holdout row {row!r}, which the brief requires, is not on {where}: "
            "deleted, rolled back or never sealed (`assay holdout add`)"
            for row in self.declared_holdout
            if row not in present
        ]


def _context(forge: Forge, brief_id: str, key: PublicKey | None) -> GateContext:
    view = fetch_view(forge, brief_id)
    brief = load_brief(forge, view.main, brief_id)
    source = brief.source or f"briefs/{brief_id}.md"
    rows = row_specs(brief.verify, source=source)
    env = env_decl(brief.env, source=source)
    log = read_log(forge, brief_id, tip=view.evidence, key=key)
    return GateContext(
        view=view,
        rows=rows,
        env=env,
        desks=claim_desks(forge, view.claim, brief=brief_id),
        log=log,
        anchors=read_claim_anchors(forge, brief_id, view.claim),
        protect=protect_globs(brief),
        title=brief.title,
        approval=(
            EventLog(forge, brief_id).read(fetched=True, tip=view.events)
            if brief.needs_approval
            else None
        ),
        holdout=read_holdout(forge, brief_id, known=_known(holdout_ref(brief_id), view.holdout)),
        declared_holdout=tuple(brief.holdout),
    )


def _known(ref: str, tip: str | None) -> dict[str, str]:
    """A fetch's answer for one ref (empty: the ref was absent)."""
    return {ref: tip} if tip else {}


def _check_journal(
    forge: Forge, ctx: GateContext, journal: Journal, head: str, *, brief_id: str
) -> None:
    """Both anchor checks: the gate's own records and the claim history (``Corrupt``).

    The claim's anchors speak for the branch's tip; an older commit (``verify --sha``)
    legitimately holds a shorter journal.
    """
    check_journal_anchors(forge, ctx.log.records, journal, head)
    if head == ctx.view.head:
        where = f"{brief_id}: journal at {head[:12]}"
        check_anchors(journal.entries, journal.head, ctx.anchors, where=where, vouched=True)


def _decision(
    ctx: GateContext,
    records: Sequence[EvidenceRecord],
    head: str,
    claimed: Claimed,
    key: PublicKey | None,
    *,
    insecure: bool = False,
    allow_unsandboxed: bool = False,
    rows_only: bool = False,
    tip: str | None = None,
) -> MergeDecision:
    """The rule's decision; ``rows_only``: verify's verdict on the rows it ran, without the
    brief-level conditions only a merge checks (its approval), as the review's state.
    ``tip``: the evidence tip ``records`` end at (default: the one the context read)."""
    decision = decide(
        brief=ctx.view.brief,
        rows=ctx.all_rows,
        records=records,
        head_sha=head,
        env=ctx.env,
        claimed=claimed,
        desk_names=ctx.desks,
        require_signed=not insecure,
        key_known=key is not None,
        allow_unsandboxed=allow_unsandboxed,
        approval=None if rows_only else ctx.approval,
    )
    decision.problems.extend(ctx.holdout_problems())
    return dataclasses.replace(decision, evidence_tip=tip or ctx.log.tip)


def _update_review_table(forge: Forge, view: ForgeView, decision: MergeDecision) -> bool:
    """Regenerate the table in the review body (best effort: a lost race is left alone)."""
    review = view.review
    if review is None or review.state in ("merged", "closed"):
        return False
    body = with_table(review.body, render_markdown(decision))
    if body == review.body:
        return False

    def build(_again: bool) -> Stage:
        stage = Stage(forge)
        stage_version(
            stage,
            review,
            message=f"review {view.brief}: evidence table at {decision.head_sha[:12]}",
            body=body,
        )
        return stage

    policy = WritePolicy(attempts=1, what="review", on_lost=lambda _r: LostRace.GIVE_BACK)
    return write(forge, build, policy=policy).ok


def verify(
    forge: Forge,
    brief_id: str,
    *,
    sha: str | None = None,
    verifier: str | None = None,
    key: GateKey | None = None,
    insecure: bool = False,
    unsandboxed: bool = False,
    workdir: Path | None = None,
    on_start: Callable[[RowSpec], None] | None = None,
    on_row: Callable[[RowSpec, EvidenceRecord], None] | None = None,
) -> VerifyReport:
    """Run every verify row of ``brief_id`` on the review's head (or ``sha``) and record it.

    Rows run in the sandbox; ``unsandboxed`` (``--insecure-unsandboxed-rows``) runs them on
    the host, for a machine without bubblewrap that accepts the risk."""
    shield_gate_process()
    key = signing_key(key=key, insecure=insecure)
    trust = gate_trust(forge, key) if key is not None else None
    trusted = trust.key if trust is not None else None
    verifier = verifier or default_verifier()
    timings: dict[str, float] = {}
    started = time.monotonic()
    ctx, head = _what_to_verify(forge, brief_id, sha, trusted)
    if trust is not None:
        refuse_other_signers(ctx.log.records, trust, brief=brief_id)
    timings["fetch"] = time.monotonic() - started
    sandbox = gate_sandbox(unsandboxed=unsandboxed)
    with (
        CleanTree(forge, head, parent=workdir) as tree,
        tempfile.TemporaryDirectory(prefix="assay-site-", dir=workdir) as site,
        tempfile.TemporaryDirectory(prefix="assay-reports-", dir=workdir) as reports,
    ):
        timings["checkout"] = time.monotonic() - started - timings["fetch"]
        at = _inspect_head(
            forge, ctx, tree, head, brief_id=brief_id, sandbox=sandbox, timings=timings
        )
        template = _record_template(
            brief_id, head, at, verifier=verifier, sandboxed=sandbox.sandboxed
        )
        ran = run_brief_rows(
            forge,
            ctx,
            key,
            head,
            plan=at.plan,
            run=functools.partial(
                run_row_specs,
                site=Path(site),
                environ=at.environ,
                sandbox=sandbox,
                template=template,
                key=key,
            ),
            reports=Path(reports),
            workdir=workdir,
            on_start=on_start,
            on_row=on_row,
            desk_side=(head, at.checkpoint),
        )
    timings["rows"] = sum(record.seconds for record in ran)
    with _timed(timings, "record"):
        log = append_records(forge, brief_id, ran, key=key, log=ctx.log)
    # Rows the caller chose to run on the host pass here; the merge still refuses them
    # unless it is told to accept them too, and every table says "unsandboxed".
    decision = _decision(
        ctx,
        log.records,
        head,
        at.claimed,
        trusted,
        insecure=insecure,
        allow_unsandboxed=unsandboxed,
        rows_only=True,
        tip=log.tip,
    )
    with _timed(timings, "review"):
        updated = head == ctx.view.head and _update_review_table(forge, ctx.view, decision)
    timings["total"] = time.monotonic() - started
    return VerifyReport(
        brief=brief_id,
        head_sha=head,
        decision=decision,
        fingerprint=at.fingerprint,
        desk_fingerprint=at.desk_fingerprint,
        env_problems=at.problems,
        ran=log.records[len(log.records) - len(ran) :],
        review_updated=updated,
        timings=timings,
        pins=at.plan,
        notes=at.notes,
    )


@contextlib.contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    """Record in ``timings[name]`` how long the block took."""
    mark = time.monotonic()
    yield
    timings[name] = time.monotonic() - mark


@dataclass(frozen=True)
class _AtHead:
    """What the gate read and checked in the head's clean tree before any row runs."""

    journal: Journal
    checkpoint: str  # the commit whose journal speaks for the head (its work tree too)
    claimed: Claimed
    environ: dict[str, str]
    fingerprint: dict[str, str]
    desk_fingerprint: dict[str, str] | None
    problems: list[str]
    plan: PinPlan | None
    changed: list[str]  # "tests/test_calc.py: edited by the desk; main's version ran"

    @property
    def notes(self) -> list[str]:
        """What the review says about the acceptance set at this head."""
        if self.plan is not None and self.plan.protect_nothing:
            return [
                "protect: []: the desk writes its own tests; nothing was pinned from main",
                *self.changed,
            ]
        return list(self.changed)


def _inspect_head(
    forge: Forge,
    ctx: GateContext,
    tree: Path,
    head: str,
    *,
    brief_id: str,
    sandbox: SandboxSpec,
    timings: dict[str, float],
) -> _AtHead:
    """Check the journal at ``head`` (``Corrupt``), read the desk's claims, fingerprint the
    rows' environment against the declaration and the desk's, pin the protected files."""
    checkpoint = checkpoint_for(forge, ctx.view, head)
    with tempfile.TemporaryDirectory(prefix="assay-journal-") as scratch:
        journal = journal_from_commit(forge, checkpoint, brief_id, Path(scratch))
        _check_journal(forge, ctx, journal, head, brief_id=brief_id)
        claimed = claimed_from_entries(journal.entries, load_blob=journal.load)
    with _timed(timings, "fingerprint"):
        environ, fp = gate_fingerprint(ctx, tree, sandbox)
    desk_fp = dict(claimed.env_fingerprint) if claimed.env_fingerprint else None
    problems = _env_problems(ctx, fp, desk_fp)
    plan, changed = _pin_tree(forge, ctx, tree, head)
    return _AtHead(journal, checkpoint, claimed, environ, fp, desk_fp, problems, plan, changed)


def _what_to_verify(
    forge: Forge, brief_id: str, sha: str | None, key: PublicKey | None
) -> tuple[GateContext, str]:
    """The brief's context and the commit to verify: ``sha`` when given, else the review's
    head; ``Failed`` when there is none or it is not on the forge."""
    ctx = _context(forge, brief_id, key)
    head = resolve_commit(forge, sha) if sha else ctx.view.head
    if head is None:
        raise Failed(f"{brief_id}: no review and no branch {branch_ref(brief_id)} to verify")
    _require_commit(forge, head, brief_id)
    return ctx, head


def gate_fingerprint(
    ctx: GateContext, tree: Path, sandbox: SandboxSpec
) -> tuple[dict[str, str], dict[str, str]]:
    """The rows' environment and the fingerprint the gate takes in ``tree`` of what a row
    started in ``sandbox`` really gets (its ``PATH`` as the sandbox sets it)."""
    environ = row_environment()  # never where the gate's key or the desks' state live
    return environ, fingerprint(ctx.env, tree, run_env=process_environment(sandbox, environ))


def _env_problems(
    ctx: GateContext, fp: dict[str, str], desk_fp: dict[str, str] | None
) -> list[str]:
    """The brief's declaration against the gate's fingerprint, then the desk's against it."""
    problems = [f"declaration: {p}" for p in declaration_problems(ctx.env, fp)]
    if desk_fp is not None:
        problems += [f"desk vs gate: {line}" for line in diff_fingerprints(desk_fp, fp)]
    return problems


def _pin_tree(
    forge: Forge, ctx: GateContext, tree: Path, head: str
) -> tuple[PinPlan | None, list[str]]:
    """Pin the tree's acceptance set to main's (``assay.evidence.pinning``), if any applies;
    with one line per file of it the branch had changed."""
    plan = plan_for(
        forge,
        head=head,
        main=ctx.view.main,
        commands=[row.command for row in ctx.rows],
        protect=ctx.protect,
    )
    if plan is None:
        return None, []
    return plan, apply_pins(forge, tree, plan)


def _record_template(
    brief_id: str, head: str, at: _AtHead, *, verifier: str, sandboxed: bool
) -> EvidenceRecord:
    """What every row's record shares; ``run_rows`` fills in the row's own fields."""
    return record_template(
        brief_id,
        head,
        fingerprint=at.fingerprint,
        verifier=verifier,
        journal_head=at.journal.head,
        plan=at.plan,
        sandboxed=sandboxed,
        notes=at.notes,
    )


class MergeOutcome(enum.Enum):
    SQUASHED = "squashed"  # one new commit on main holding the brief's code
    CREATED = "created"  # the forge had no main: that commit starts it
    UP_TO_DATE = "up_to_date"


# What a merge keeps off main: the run's journal and Assay's other files live under it.
ASSAY_FOLDER = ".assay"


@dataclass(frozen=True)
class MergeResult:
    brief: str
    head_sha: str
    main_before: str | None
    main_after: str
    outcome: MergeOutcome
    decision: MergeDecision
    run: str | None = None  # the run ref this merge kept the run's checkpoints under

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "code": 0,
            "brief": self.brief,
            "head_sha": self.head_sha,
            "main_before": self.main_before,
            "main_after": self.main_after,
            "outcome": self.outcome.value,
            "run": self.run,
            "decision": self.decision.to_json(),
        }


class MergeRefused(Failed):
    """The merge rule refused: ``details["decision"]`` names each missing, failing or stale row."""

    def __init__(self, decision: MergeDecision) -> None:
        lines = decision.blocking()
        super().__init__(
            f"{decision.brief}: merge refused at {decision.head_sha[:12]}: " + "; ".join(lines),
            decision=decision.to_json(),
        )
        self.decision = decision


def merge_decision(
    forge: Forge,
    brief_id: str,
    *,
    key: PublicKey | None = None,
    insecure: bool = False,
    allow_unsandboxed: bool = False,
) -> MergeDecision:
    """The merge rule at the review's current head, after every integrity check.

    ``key`` defaults to the key the forge vouches for (``assay.evidence.trust``); with none
    at hand (a desk or a sync showing the table on a forge that records no key), a record's
    signature is seen but not checked; ``merge`` itself always checks it.
    """
    if key is None and not insecure:
        key = reader_key(forge)
    return judge_for_merge(
        forge, brief_id, key=key, insecure=insecure, allow_unsandboxed=allow_unsandboxed
    )[1]


def judge_for_merge(
    forge: Forge,
    brief_id: str,
    *,
    key: PublicKey | None,
    insecure: bool = False,
    allow_unsandboxed: bool = False,
) -> tuple[GateContext, MergeDecision]:
    """The brief's context and the merge rule's decision at the review's current head,
    after the journal's integrity checks (``Corrupt``), with a missing or unready review
    among its problems: what ``merge`` and a batch judge a brief by."""
    ctx = _context(forge, brief_id, key)
    head = ctx.view.head
    if head is None:
        raise Failed(f"{brief_id}: no review and no branch {branch_ref(brief_id)} to merge")
    _require_commit(forge, head, brief_id)
    with tempfile.TemporaryDirectory(prefix="assay-merge-") as scratch:
        checkpoint = checkpoint_for(forge, ctx.view, head)
        journal = journal_from_commit(forge, checkpoint, brief_id, Path(scratch))
        _check_journal(forge, ctx, journal, head, brief_id=brief_id)
        claimed = claimed_from_entries(journal.entries, load_blob=journal.load)
    decision = _decision(
        ctx,
        ctx.log.records,
        head,
        claimed,
        key,
        insecure=insecure,
        allow_unsandboxed=allow_unsandboxed,
    )
    review = ctx.view.review
    if review is None:
        decision.problems.insert(0, f"there is no review to merge ({reviews_ref(brief_id)})")
    elif review.state in ("draft", "closed"):
        decision.problems.insert(0, f"the review is {review.state}, not ready")
    return ctx, decision


def review_table(forge: Forge, brief_id: str, *, key: PublicKey | None = None) -> str:
    """The claimed-versus-verified Markdown for a review body, as things stand now.

    For the desk to call whenever it rewrites the review (its side changed): pass the
    result through ``with_table(body, ...)``. An integrity failure is shown, not raised:
    the review must still say something, and ``verify``/``merge`` will refuse anyway.
    """
    try:
        decision = merge_decision(forge, brief_id, key=key)
    except Corrupt as corrupt:
        return f"Evidence: **corrupt**: {corrupt.message}\n"
    return render_markdown(decision)


def already_merged(forge: Forge, ctx: GateContext, head: str) -> bool:
    """Whether main already holds ``head``'s work: the head itself (merged whole, as before
    squashes), or a review marked merged at this very head."""
    main, review = ctx.view.main, ctx.view.review
    if main is None:
        return False
    if main == head or is_ancestor(forge, head, main):
        return True
    return review is not None and review.state == "merged" and review.head_sha == head


def squashed_main(
    forge: Forge, ctx: GateContext, head: str, *, ff_only: bool, brief: str
) -> tuple[str, MergeOutcome]:
    """Main after merging ``head``: one new commit whose parent is main and whose tree is
    main merged with the head, with main's own ``.assay/`` (none on a new forge) in place
    of anything the head holds there, so the journal and every checkpoint stay on the
    journal ref and the run ref. ``UP_TO_DATE`` when main already holds the head's work."""
    main = ctx.view.main
    if main is not None and already_merged(forge, ctx, head):
        return main, MergeOutcome.UP_TO_DATE
    if main is None:
        tree = head
    elif ff_only and not is_ancestor(forge, main, head):
        raise Failed(
            f"{brief}: main ({main[:12]}) has moved past the review's base and --ff-only was "
            "given: sync the branch with main and verify again"
        )
    else:
        merged = forge.merge_tree(main, head)
        if merged is None:
            raise Failed(
                f"{brief}: the review's head {head[:12]} does not merge cleanly into main "
                f"{main[:12]}"
            )
        tree = merged
    from assay.evidence.reviews import GATE_IDENTITY

    commit = forge.commit_tree(
        forge.tree_keeping(tree, ASSAY_FOLDER, like=main),
        parents=[main] if main is not None else [],
        message=squash_message(ctx, head),
        author=GATE_IDENTITY,
    )
    return commit, MergeOutcome.CREATED if main is None else MergeOutcome.SQUASHED


def stage_run(stage: Stage, forge: Forge, ctx: GateContext, head: str) -> str:
    """Stage the run's checkpoints (its journal with them) under its run ref, with the
    branch and the journal ref pinned at what was judged (a push racing the merge aborts
    it); returns the run ref. Main keeps only the squashed code: this ref keeps the rest.

    A run ref this very attempt already has (a merge that stopped after keeping the run
    and before main moved, on a forge where the two are not one push) is moved on to the
    judged checkpoint when it holds an older one of the same run, and left when it holds
    this one; one holding anything else is not this run's: ``Failed``."""
    view = ctx.view
    run = run_ref(view.brief, ctx.anchors.attempt)
    checkpoint = checkpoint_for(forge, view, head)
    kept = view.runs.get(run)
    if kept is not None and kept != checkpoint and not is_ancestor(forge, kept, checkpoint):
        raise Failed(
            f"{view.brief}: {run} holds {kept[:12]}, which is not a checkpoint of the run "
            f"judged at {head[:12]}: another run's, or forged"
        )
    if kept != checkpoint:
        stage.add(RefUpdate(run, checkpoint, expected=kept))
    pin_judged(stage, view)
    return run


def pin_judged(stage: Stage, view: ForgeView) -> None:
    """Pin the branch and its journal ref at what was judged."""
    for ref, tip in (
        (branch_ref(view.brief), view.branch),
        (journal_ref(view.brief), view.journal),
    ):
        if tip is not None:
            stage.pin(ref, tip)


def keep_run(forge: Forge, ctx: GateContext, head: str) -> str:
    """Push the run ref alone (``stage_run``), before a forge that merges on its own (GitHub)
    moves main: the run is kept first, so no merged brief is ever without its run; a lost
    race (the branch or its journal moved since it was judged) is ``Busy``."""
    run = ""

    def build(_again: bool) -> Stage:
        nonlocal run
        stage = Stage(forge)
        run = stage_run(stage, forge, ctx, head)
        return stage

    def moved(_result: PushResult) -> Busy:
        return Busy(f"{ctx.view.brief}: the branch or its journal moved since it was judged")

    write(
        forge, build, policy=WritePolicy(attempts=1, what="run ref", on_lost=refuse_on_loss(moved))
    )
    return run


def squash_message(ctx: GateContext, head: str) -> str:
    """The squash commit's message: the brief's title, then trailers naming the brief, the
    head it was judged at, the evidence log's newest record and the kept run."""
    brief = ctx.view.brief
    evidence = ctx.log.records[-1].digest if ctx.log.records else ""
    return (
        f"{ctx.title}\n\n"
        f"Brief {brief}: every verify row passed at {head[:12]}.\n\n"
        f"Assay-Brief: {brief}\n"
        f"Assay-Head: {head}\n"
        f"Assay-Evidence: {evidence}\n"
        f"Assay-Run: {run_ref(brief, ctx.anchors.attempt)}\n"
    )


def merge(
    forge: Forge,
    brief_id: str,
    *,
    key: GateKey | None = None,
    insecure: bool = False,
    ff_only: bool = False,
    allow_unsandboxed: bool = False,
) -> MergeResult:
    """Merge the review's head into main as one squashed commit when the merge rule allows
    it, keeping the run's checkpoints under its run ref; else ``MergeRefused``.

    ``allow_unsandboxed`` (``--allow-unsandboxed-evidence``) accepts rows the gate ran on
    the host; without it their records block the merge. Signatures are checked with the
    key the forge vouches for (no private key needed), else with this gate's own."""
    trusted = merge_key(forge, key, insecure=insecure)
    merged: list[MergeResult] = []

    def build(_again: bool) -> Stage:
        """Judge from fresh refs and stage the merge (again after a lost race: something
        moved, main, the branch or the review)."""
        ctx, decision = judge_for_merge(
            forge, brief_id, key=trusted, insecure=insecure, allow_unsandboxed=allow_unsandboxed
        )
        if not decision.allowed:
            raise MergeRefused(decision)
        head = decision.head_sha
        view = ctx.view
        new_main, outcome = squashed_main(forge, ctx, head, ff_only=ff_only, brief=brief_id)
        stage = Stage(forge)
        run = None
        if outcome is not MergeOutcome.UP_TO_DATE:
            stage.add(RefUpdate(MAIN_REF, new_main, expected=view.main))
            run = stage_run(stage, forge, ctx, head)
            stage.send = forge.merge_gate  # a merge: within the forge's merge budget
        else:
            pin_judged(stage, view)
        if view.review is not None and view.review.state != "merged":
            stage_version(
                stage,
                view.review,
                message=f"review {brief_id}: merged at {head[:12]}",
                state="merged",
                head_sha=head,
                body=with_table(view.review.body, render_markdown(decision)),
            )
        if not stage.moves:
            outcome, run = MergeOutcome.UP_TO_DATE, None
        merged[:] = [MergeResult(brief_id, head, view.main, new_main, outcome, decision, run)]
        return stage

    def busy(_result: PushResult) -> Busy:
        return Busy(f"{brief_id}: main, the branch or the review kept moving; merge not done")

    policy = WritePolicy(
        attempts=MERGE_ATTEMPTS, what="merge", refused_is_lost=True, exhausted=busy
    )
    write(forge, build, policy=policy)
    return merged[0]
