"""Merges in batches: several verified briefs onto main in one atomic push.

GitHub recommends at most one merged pull request a minute per repository; a fleet that
finishes more briefs than that must merge them together. ``merge_batch`` does, by the same
rule as ``assay.evidence.gate.merge`` for each brief:

1. every brief is judged as ``merge`` judges it (evidence signed and passing at the
   review's current head, the journal anchored, the review ready, any approval given); one
   the rule refuses is left out of the batch (``REFUSED``), its reasons named;
2. the others are stacked on main in the order given, each as its own squash commit (its
   title and trailers, main's ``.assay/`` kept: exactly the commit ``merge`` would make,
   with the previous brief's commit as its parent). A brief that does not merge cleanly
   onto the stack is left out (``LEFT_OUT``);
3. each brief's rows are run again by the gate on the stack's top, the batch's combined
   tree (the gate's own runner and sandbox, the acceptance set pinned from main as
   ``verify`` pins it, a structured runner's report read as ``verify`` reads it, the
   environment's fingerprint held to the declaration and to verify's at the head). A
   brief with a failing row or a moved environment is left out, the stack is made again
   without it, and the rows of those still in run again, until every brief in the batch
   passes on its tree;
4. one atomic push moves main to the top of the stack and, for every brief in it, creates
   its run ref (``refs/assay/runs/<brief>/<attempt>``), pins its branch at the judged head
   and marks its review merged; the review of each brief left out by steps 2 and 3 gets
   the reason in the same push. The push goes through the forge's merge budget
   (``Forge.merge_gate``): it is one merge, however many briefs it carries.

A push that loses its race (main, a branch or a review moved) moved nothing, and the whole
batch is judged again from the new refs: a batch lands whole or not at all, and a SIGKILL
at any instant leaves main and every run ref as one of the two.
"""

from __future__ import annotations

import enum
import functools
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.errors import BadInput, Busy, Corrupt, Failed
from assay.evidence.fingerprint import declaration_problems, diff_fingerprints
from assay.evidence.gate import (
    ASSAY_FOLDER,
    MERGE_ATTEMPTS,
    GateContext,
    already_merged,
    gate_fingerprint,
    judge_for_merge,
    squash_message,
    stage_run,
)
from assay.evidence.keys import GateKey, PublicKey, gate_key
from assay.evidence.pinning import apply_pins, plan_for
from assay.evidence.records import EvidenceRecord
from assay.evidence.reviews import GATE_IDENTITY, stage_version
from assay.evidence.rows import record_template, run_brief_rows, run_row_specs
from assay.evidence.rule import MergeDecision
from assay.evidence.runner import gate_sandbox, shield_gate_process
from assay.evidence.source import MAIN_REF, CleanTree
from assay.evidence.table import render_markdown, with_table
from assay.evidence.trust import merge_key
from assay.forge import Forge
from assay.forge.records import Stage, WritePolicy, write
from assay.plumbing import PushResult, RefUpdate
from assay.refs import run_ref
from assay.sandbox import SandboxSpec

# The review body's note on why the last batch left the brief out (replaced at each batch,
# removed when the brief merges).
NOTE_BEGIN = "<!-- assay:batch:begin -->"
NOTE_END = "<!-- assay:batch:end -->"


class BatchOutcome(enum.Enum):
    """What a batch did with one brief."""

    SQUASHED = "squashed"  # its squash commit is on main, in this batch's push
    UP_TO_DATE = "up_to_date"  # main already held its work
    REFUSED = "refused"  # the merge rule refused it at its head (not verified, stale, ...)
    LEFT_OUT = "left_out"  # verified, but it conflicts with or fails on the batch's tree


@dataclass(frozen=True)
class BatchEntry:
    """One brief's part in a batch."""

    brief: str
    outcome: BatchOutcome
    head_sha: str | None = None
    commit: str | None = None  # its squash commit on main
    run: str | None = None  # the run ref that keeps its branch
    reasons: tuple[str, ...] = ()  # why it was refused or left out
    rows: tuple[EvidenceRecord, ...] = ()  # its rows on the batch's combined tree

    @property
    def landed(self) -> bool:
        return self.outcome in (BatchOutcome.SQUASHED, BatchOutcome.UP_TO_DATE)

    def to_json(self) -> dict[str, Any]:
        return {
            "brief": self.brief,
            "outcome": self.outcome.value,
            "head_sha": self.head_sha,
            "commit": self.commit,
            "run": self.run,
            "reasons": list(self.reasons),
            "combined_rows": [
                {
                    "row": record.row,
                    "passed": record.passed,
                    "exit": record.exit,
                    "seconds": round(record.seconds, 3),
                }
                for record in self.rows
            ],
        }


@dataclass(frozen=True)
class BatchResult:
    """What ``merge_batch`` did: main before and after, and each brief's entry."""

    main_before: str | None
    main_after: str | None
    entries: tuple[BatchEntry, ...]
    attempts: int
    merged: bool  # main moved, in one merge push

    @property
    def squashed(self) -> list[BatchEntry]:
        return [e for e in self.entries if e.outcome is BatchOutcome.SQUASHED]

    @property
    def ok(self) -> bool:
        return all(entry.landed for entry in self.entries)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "failed",
            "code": 0 if self.ok else 1,
            "main_before": self.main_before,
            "main_after": self.main_after,
            "merged": self.merged,
            "attempts": self.attempts,
            "briefs": [entry.to_json() for entry in self.entries],
        }


Progress = Callable[[str], None]


@dataclass
class _Candidate:
    """A brief the rule allows, with what the batch needs of it."""

    ctx: GateContext
    decision: MergeDecision
    head: str
    rows: tuple[EvidenceRecord, ...] = ()
    env_problems: tuple[str, ...] = ()
    unjudged: tuple[str, ...] = ()  # why some of its rows could not run on the tree
    commit: str | None = None


@dataclass
class _Plan:
    """One attempt's batch: the stack on ``main`` and what was left out of it."""

    main: str | None
    entries: dict[str, BatchEntry] = field(default_factory=dict)  # decided (not in the stack)
    stack: list[_Candidate] = field(default_factory=list)
    dropped: dict[str, tuple[GateContext, tuple[str, ...], tuple[EvidenceRecord, ...]]] = field(
        default_factory=dict
    )  # left out: its context, reasons and rows (for its review's note)

    @property
    def top(self) -> str | None:
        return self.stack[-1].commit if self.stack else self.main


def merge_batch(
    forge: Forge,
    briefs: Sequence[str],
    *,
    key: GateKey | None = None,
    insecure: bool = False,
    allow_unsandboxed: bool = False,
    unsandboxed: bool = False,
    workdir: Path | None = None,
    on_progress: Progress | None = None,
) -> BatchResult:
    """Merge ``briefs`` into main together: see the module docstring.

    ``unsandboxed`` runs the combined tree's rows on the host (``--insecure-unsandboxed-rows``);
    ``allow_unsandboxed`` accepts evidence rows verify ran there, as ``merge`` does."""
    shield_gate_process()
    say = on_progress or (lambda _text: None)
    trusted = merge_key(forge, key, insecure=insecure)
    # The gate's own key opens the briefs' holdout rows on the combined tree and signs the
    # batch's check where the forge asks for one; a gate that has none leaves out every
    # brief with holdout rows (they cannot be judged there).
    if key is None and not insecure:
        key = gate_key()
    sandbox = gate_sandbox(unsandboxed=unsandboxed)
    wanted = list(dict.fromkeys(briefs))
    attempts = 0
    plan = _Plan(main=None)

    def build(again: bool) -> Stage:
        """Judge every brief from fresh refs, settle the stack on the combined tree and
        stage the batch's one push (again after a lost race: main, a branch or a review
        moved, so the batch is judged whole again)."""
        nonlocal attempts, plan
        attempts += 1
        if again:
            say("main, a branch or a review moved: judging the batch again from the new main")
        plan = _judged(
            forge, wanted, key=trusted, insecure=insecure, allow_unsandboxed=allow_unsandboxed
        )
        _settle_stack(forge, plan, sandbox=sandbox, workdir=workdir, key=key, say=say)
        stage = _stage(forge, plan)
        if stage.moves:
            if plan.stack:
                say(f"pushing {len(plan.stack)} squash commit(s) to main")
                assert plan.top is not None
                for update in forge.before_main_moves(plan.top, key=key):
                    stage.add(update)
                stage.send = forge.merge_gate  # one merge, however many briefs it carries
            else:
                say("recording why briefs were left out")
        return stage

    def busy(result: PushResult) -> Busy:
        return Busy(
            "main, a branch or a review kept moving, or the forge kept refusing the push; the "
            f"batch was not merged (the last refusal: {result.detail or 'none'})"
        )

    policy = WritePolicy(
        attempts=MERGE_ATTEMPTS, what="merge", refused_is_lost=True, exhausted=busy
    )
    written = write(forge, build, policy=policy)
    return _result(plan, wanted, attempts, merged=written.result is not None and bool(plan.stack))


def _judged(
    forge: Forge,
    briefs: Sequence[str],
    *,
    key: PublicKey | None,
    insecure: bool,
    allow_unsandboxed: bool,
) -> _Plan:
    """Every brief judged against one main (read again while main moves under the reads)."""
    for _ in range(MERGE_ATTEMPTS):
        plan = _judge_all(
            forge, briefs, key=key, insecure=insecure, allow_unsandboxed=allow_unsandboxed
        )
        if plan is not None:
            return plan
    raise Busy("main kept moving while the batch's briefs were read; the batch was not merged")


def _judge_all(
    forge: Forge,
    briefs: Sequence[str],
    *,
    key: PublicKey | None,
    insecure: bool,
    allow_unsandboxed: bool,
) -> _Plan | None:
    """Judge every brief by the merge rule; None when they did not all see one main.

    A brief's own problem (its evidence refused, its journal or records corrupt, its brief
    malformed) leaves it out, named; the forge being unreachable, a key the forge does not
    trust or a bug stops the batch."""
    plan: _Plan | None = None
    refused: dict[str, BatchEntry] = {}
    candidates: list[_Candidate] = []
    for brief in briefs:
        try:
            ctx, decision = judge_for_merge(
                forge, brief, key=key, insecure=insecure, allow_unsandboxed=allow_unsandboxed
            )
        except (Failed, Corrupt, BadInput) as problem:
            refused[brief] = BatchEntry(brief, BatchOutcome.REFUSED, reasons=(problem.message,))
            continue
        if plan is None:
            plan = _Plan(main=ctx.view.main)
        elif ctx.view.main != plan.main:
            return None
        head = decision.head_sha
        if not decision.allowed:
            refused[brief] = BatchEntry(
                brief, BatchOutcome.REFUSED, head_sha=head, reasons=tuple(decision.blocking())
            )
            continue
        if already_merged(forge, ctx, head):
            refused[brief] = BatchEntry(brief, BatchOutcome.UP_TO_DATE, head_sha=head)
            continue
        candidates.append(_Candidate(ctx, decision, head))
    plan = plan or _Plan(main=None)
    plan.entries, plan.stack = refused, candidates
    return plan


def _settle_stack(
    forge: Forge,
    plan: _Plan,
    *,
    sandbox: SandboxSpec,
    workdir: Path | None,
    key: GateKey | None,
    say: Progress,
) -> None:
    """Stack the candidates, run each one's rows on the top, drop those that fail and
    stack again, until every brief left passes on the combined tree."""
    while plan.stack:
        _stack(forge, plan, say=say)
        if not plan.stack:
            return
        top = plan.top
        assert top is not None
        failing: list[_Candidate] = []
        for index, candidate in enumerate(plan.stack, start=1):
            brief = candidate.ctx.view.brief
            say(f"running {brief}'s rows on the batch's tree ({index}/{len(plan.stack)})")
            found = _rows_on(
                forge, candidate, top, plan.main, sandbox=sandbox, workdir=workdir, key=key
            )
            candidate.rows, candidate.env_problems = found.rows, found.env_problems
            candidate.unjudged = found.unjudged
            if not found.passed:
                failing.append(candidate)
        if not failing:
            return
        for candidate in failing:
            reasons = (
                candidate.unjudged
                + tuple(
                    f"the environment on the batch's combined tree {top[:12]} differs: {line}"
                    for line in candidate.env_problems
                )
                + tuple(_failure(record, top) for record in candidate.rows if not record.passed)
            )
            plan.dropped[candidate.ctx.view.brief] = (candidate.ctx, reasons, candidate.rows)
            say(f"left {candidate.ctx.view.brief} out: {reasons[0]}")
        plan.stack = [c for c in plan.stack if c not in failing]


def _failure(record: EvidenceRecord, top: str) -> str:
    what = "timed out" if record.timed_out else f"exit {record.exit}"
    line = f"row {record.row!r} fails on the batch's combined tree {top[:12]} ({what})"
    if record.findings:
        line += f": {record.findings[0]}"
    elif record.output_tail.strip():
        line += f": {record.output_tail.strip().splitlines()[-1][:200]}"
    return line


def _stack(forge: Forge, plan: _Plan, *, say: Progress) -> None:
    """Each candidate's squash commit on the previous one (the first on main); one that
    does not merge cleanly onto the stack is left out of it."""
    tip = plan.main
    kept: list[_Candidate] = []
    for candidate in plan.stack:
        ctx, head = candidate.ctx, candidate.head
        tree = head if tip is None else forge.merge_tree(tip, head)
        if tree is None:
            assert tip is not None
            reason = (
                f"its head {head[:12]} does not merge cleanly onto the batch "
                f"(main {str(plan.main)[:12]} and the briefs before it)"
            )
            plan.dropped[ctx.view.brief] = (ctx, (reason,), ())
            say(f"left {ctx.view.brief} out: {reason}")
            continue
        candidate.commit = forge.commit_tree(
            forge.tree_keeping(tree, ASSAY_FOLDER, like=tip),
            parents=[tip] if tip is not None else [],
            message=squash_message(ctx, head),
            author=GATE_IDENTITY,
        )
        tip = candidate.commit
        kept.append(candidate)
    plan.stack = kept


@dataclass(frozen=True)
class _OnTree:
    """What one brief's rows did on the combined tree, and what its environment said."""

    rows: tuple[EvidenceRecord, ...]
    env_problems: tuple[str, ...]
    unjudged: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return (
            not self.env_problems
            and not self.unjudged
            and all(record.passed for record in self.rows)
        )


def _rows_on(
    forge: Forge,
    candidate: _Candidate,
    top: str,
    main: str | None,
    *,
    sandbox: SandboxSpec,
    workdir: Path | None,
    key: GateKey | None,
) -> _OnTree:
    """The brief's rows run on the combined tree ``top`` as ``verify`` runs them: in a
    clean checkout with the brief's acceptance set pinned from main, in the sandbox, each
    runner's own report read, the environment fingerprinted there and held to the brief's
    declaration and to what verify saw at the head (another brief's lock file change is a
    difference). Nothing is recorded on the evidence ref (the records speak of the
    review's head); the batch's entry and the review's note carry them."""
    ctx = candidate.ctx
    with (
        CleanTree(forge, top, parent=workdir) as tree,
        tempfile.TemporaryDirectory(prefix="assay-site-", dir=workdir) as site,
        tempfile.TemporaryDirectory(prefix="assay-reports-", dir=workdir) as reports,
    ):
        environ, fp = gate_fingerprint(ctx, tree, sandbox)
        problems = [f"declaration: {line}" for line in declaration_problems(ctx.env, fp)]
        verified = [r for r in ctx.log.records if r.head_sha == candidate.head]
        if verified:
            problems += diff_fingerprints(
                verified[-1].env_fingerprint, fp, left="verified", right="batch"
            )
        pins = plan_for(
            forge,
            head=top,
            main=main,
            commands=[row.command for row in ctx.rows],
            protect=ctx.protect,
        )
        # The batch's other briefs may have edited this one's acceptance set: main's runs.
        changed = apply_pins(forge, tree, pins) if pins is not None else []
        template = record_template(
            ctx.view.brief,
            top,
            fingerprint=fp,
            verifier="gate:batch",
            journal_head="",
            plan=pins,
            sandboxed=sandbox.sandboxed,
            notes=changed,
        )
        # The holdout rows too, by the same rules as verify runs them: a brief the batch's
        # other briefs break where only a holdout row looks is left out like any other.
        unjudged = (
            ("its holdout rows cannot be run on the batch's tree: this gate holds no key",)
            if ctx.holdout and key is None
            else ()
        )
        ran = run_brief_rows(
            forge,
            ctx,
            key,
            top,
            plan=pins,
            run=functools.partial(
                run_row_specs,
                site=Path(site),
                environ=environ,
                sandbox=sandbox,
                template=template,
                key=key,
            ),
            reports=Path(reports),
            workdir=workdir,
        )
    return _OnTree(tuple(ran), tuple(problems), unjudged)


def with_note(body: str, note: str | None) -> str:
    """``body`` with the batch note replaced by ``note`` (removed when None)."""
    start, end = body.find(NOTE_BEGIN), body.find(NOTE_END)
    if start != -1 and end > start:
        body = body[:start].rstrip("\n") + body[end + len(NOTE_END) :].lstrip("\n")
        body = body if not body or body.endswith("\n") else body + "\n"
    if note is None:
        return body
    block = f"{NOTE_BEGIN}\n{note.rstrip()}\n{NOTE_END}\n"
    return f"{body.rstrip()}\n\n{block}" if body.strip() else block


def _left_out_note(reasons: Sequence[str], main: str | None, merged: Sequence[str]) -> str:
    """Why the brief was left out, and which briefs merged in its stead (one of them may be
    what broke it)."""
    lines = [f"**Left out of a batched merge** onto main {str(main)[:12]}:", ""]
    lines += [f"- {reason}" for reason in reasons]
    lines.append("")
    if merged:
        lines.append(f"Merged in that batch: {', '.join(merged)}.")
    lines.append("The next batch tries this brief again.")
    return "\n".join(lines)


def _stage(forge: Forge, plan: _Plan) -> Stage:
    """The one atomic push: main to the top of the stack; per brief in it, its run ref,
    its branch pinned and its review merged; per brief left out, the note on its review."""
    stage = Stage(forge)
    if plan.stack:
        stage.add(RefUpdate(MAIN_REF, plan.top, expected=plan.main))
    for candidate in plan.stack:
        ctx, head = candidate.ctx, candidate.head
        brief, view = ctx.view.brief, ctx.view
        # The run's checkpoints kept, its branch and journal pinned, as a single merge does.
        stage_run(stage, forge, ctx, head)
        if view.review is not None and view.review.state != "merged":
            table = render_markdown(candidate.decision)
            stage_version(
                stage,
                view.review,
                message=f"review {brief}: merged at {head[:12]} in a batch",
                state="merged",
                head_sha=head,
                body=with_table(with_note(view.review.body, None), table),
            )
    for brief, (ctx, reasons, _rows) in plan.dropped.items():
        review = ctx.view.review
        if review is None:
            continue
        merged = [candidate.ctx.view.brief for candidate in plan.stack]
        body = with_note(review.body, _left_out_note(reasons, plan.main, merged))
        if body != review.body:
            stage_version(
                stage, review, message=f"review {brief}: left out of a batched merge", body=body
            )
    return stage


def _result(plan: _Plan, briefs: Sequence[str], attempts: int, *, merged: bool) -> BatchResult:
    entries = dict(plan.entries)
    for candidate in plan.stack:
        ctx = candidate.ctx
        brief = ctx.view.brief
        entries[brief] = BatchEntry(
            brief,
            BatchOutcome.SQUASHED,
            head_sha=candidate.head,
            commit=candidate.commit,
            run=run_ref(brief, ctx.anchors.attempt),
            rows=candidate.rows,
        )
    for brief, (ctx, reasons, rows) in plan.dropped.items():
        entries[brief] = BatchEntry(
            brief, BatchOutcome.LEFT_OUT, head_sha=ctx.view.head, reasons=reasons, rows=rows
        )
    return BatchResult(
        main_before=plan.main,
        main_after=plan.top,
        entries=tuple(entries[brief] for brief in briefs if brief in entries),
        attempts=attempts,
        merged=merged,
    )


def ready_briefs(forge: Forge) -> list[str]:
    """The briefs whose review is ready (not merged, closed or a draft), by id: what
    ``assay merge --ready`` offers the batch, read from the one read model of the forge."""
    from assay.forgestate.source import read_snapshot

    snapshot = read_snapshot(forge, journals=False, briefs=False, extra_briefs=False)
    return sorted(brief for brief, state in snapshot.review_states.items() if state == "ready")
