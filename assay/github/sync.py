"""``assay github sync``: reconcile GitHub with what git says, paying only for differences.

The desk loop, the gate and the sweepers write claims, review records and evidence to git,
the same on every forge. This module reads them (git only: claims in one fetch, each
brief's review record and evidence log) and brings GitHub in line through
``GitHubMirror``: the claim label and comment, the draft pull request (opened, body
regenerated, made ready for review), the ``assay/evidence`` check run. The mirror's own
record says what was written last, so a sync with nothing new costs no REST call at all.

``parts`` limits a sync to what a workflow's token may do: the gate runs with
``checks: write`` only, so it syncs ``evidence`` alone. Only that part judges anything (the
gate's key in hand); the pull request's body is the review record's, with the evidence
block the gate wrote there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import assay.refs as refs
from assay.claims import ClaimRecord, ClaimStore
from assay.desks.records.review import Review, read_review
from assay.errors import Failed
from assay.evidence.gate import judge_for_merge, keep_run, merge_decision, squash_message
from assay.evidence.keys import KEY_ENV, PUBLIC_KEY_ENV, GateKey, gate_key, public_key_from_env
from assay.evidence.rule import MergeDecision
from assay.evidence.trust import merge_key
from assay.github.accept import rollback_problems
from assay.github.events import unrecorded_answers
from assay.github.forge import GitHubForge
from assay.github.gatecheck import gate_check_problems
from assay.github.issues import IssueBrief, issue_briefs
from assay.github.mirror import GitHubMirror, MirrorState, MirrorWrites, mirror_ref, review_body

PARTS = ("claims", "reviews", "evidence")


@dataclass
class SyncReport:
    """What a sync did per brief (REST actions), and problems it met without stopping."""

    actions: dict[str, list[str]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"actions": self.actions, "problems": self.problems}


def sync(
    forge: GitHubForge,
    briefs: Iterable[str] | None = None,
    *,
    parts: Iterable[str] = PARTS,
    gate_workflow: str | None = None,
) -> SyncReport:
    """Mirror ``briefs`` (default: every claimed brief) onto GitHub; see the module docstring.

    What a brief owes GitHub (its claim's label and comment, its pull request) goes out in
    one GraphQL request (``MirrorWrites``). With ``gate_workflow``, a review that is ready
    at a head the gate has not been started for gets one ``workflow_dispatch`` of that
    workflow (inputs ``brief`` and ``sha``).
    """
    wanted = set(parts)
    mirror = GitHubMirror(forge)
    store = ClaimStore(forge)
    claims = {record.brief: record for record in store.list()}
    states = mirror.states()
    names = sorted(briefs) if briefs is not None else sorted(set(claims) | set(states))
    report = SyncReport()
    issues = _IssueNumbers(forge)
    for brief in names:
        writes = mirror.writes(brief)
        state = writes.state
        if "claims" in wanted:
            if state.issue is None:
                state.issue, state.issue_node = issues.get(brief)
                writes.plan.issue, writes.plan.issue_node = state.issue, state.issue_node
            writes.claim(claims.get(brief))
        review = read_review(forge, brief) if wanted & {"reviews", "evidence"} else None
        if "reviews" in wanted and review is not None:
            _sync_review(writes, review, claim=claims.get(brief))
        actions = writes.send("sync")
        if "reviews" in wanted and review is not None and review.state == "ready" and gate_workflow:
            actions += mirror.dispatch_gate(brief, workflow=gate_workflow, head_sha=review.head_sha)
        if "evidence" in wanted and review is not None:
            actions += _publish_evidence(mirror, brief, report)
        report.actions[brief] = actions
    return report


class _IssueNumbers:
    """Issue numbers (and GraphQL ids) by brief: one conditional list call for the whole
    sync, made only when some brief's mirror record does not already know its issue."""

    def __init__(self, forge: GitHubForge) -> None:
        self._forge = forge
        self._numbers: dict[str, tuple[int, str | None]] | None = None

    def get(self, brief: str) -> tuple[int | None, str | None]:
        if self._numbers is None:
            found = issue_briefs(self._forge).briefs
            self._numbers = {key: (value.number, value.node) for key, value in found.items()}
        return self._numbers.get(brief, (None, None))


def _sync_review(writes: MirrorWrites, review: Review, *, claim: ClaimRecord | None) -> None:
    """Open, regenerate or ready the pull request, in the brief's one request: opened ready
    for review when the run has already finished (no draft to mark ready after).

    The body is the review record's, the gate's evidence block included as the gate
    wrote it at its last verify (``assay.evidence.gate``): a sync judges nothing, so the
    verdict has one owner and one rendering."""
    ready = review.state == "ready"
    body = review_body(writes.brief, issue=writes.plan.issue, summary=review.body, decision=None)
    writes.open_review(title=review.title, branch=review.branch, body=body, ready=ready)
    if ready:
        writes.finish_review(body=body, claim=claim)
    else:
        writes.update_review_body(body)


def _publish_evidence(mirror: GitHubMirror, brief: str, report: SyncReport) -> list[str]:
    """The gate's ``assay/evidence`` check run at the review's head (``check+`` when a run
    was written), with the merge rule's verdict (an approval included: a ruleset that
    requires the check must not let a brief merge before it), once the gate has verified
    a row there. Only a holder of the gate's key publishes: an unproven run would only
    stand in the gate's way (the merge reads the newest run), so a sync without the key (a
    desk's) leaves it alone and judges nothing."""
    key = gate_key()
    if key is None:
        return []
    try:
        decision = merge_decision(mirror.forge, brief, key=key.public)
    except Exception as exc:  # a sync reports evidence it cannot judge; it goes on
        report.problems[brief] = f"{type(exc).__name__}: {exc}"
        return []
    if not any(status.verified for status in decision.rows):
        return []
    return publish_verified(mirror, decision, key=key)


def publish_verified(mirror: GitHubMirror, decision: MergeDecision, *, key: GateKey) -> list[str]:
    """Publish ``decision`` (its rows, verdict and evidence tip) as the gate's check run;
    what each ``assay verify`` on GitHub does with the records it has just written."""
    brief = decision.brief
    before = mirror.state(brief).check_runs.get(decision.head_sha)
    made = mirror.publish_evidence(brief, decision=decision, key=key)
    return ["check+"] if made != before else []


ANSWERS = ("approve", "reject")


def dispatch_answered(forge: GitHubForge, briefs: Iterable[str], *, workflow: str) -> list[str]:
    """Dispatch the gate again for each of ``briefs`` whose ready review an approval or a
    rejection has just answered; returns the briefs dispatched.

    The merge rule's verdict counts the answer, and only the gate publishes a verdict (its
    signed check run, which a merge on GitHub requires): without this, a brief verified
    before its approval kept a failing check run at a head nothing would judge again."""
    mirror = GitHubMirror(forge)
    sent: list[str] = []
    for brief in sorted(set(briefs)):
        review = read_review(forge, brief)
        if review is None or review.state != "ready":
            continue
        mirror.dispatch_gate(brief, workflow=workflow, head_sha=review.head_sha, again=True)
        sent.append(brief)
    return sent


def merge_on_github(forge: GitHubForge, brief: str) -> tuple[str, list[str]]:
    """Merge ``brief``'s pull request when the merge rule allows it at the current head.

    The rule (``judge_for_merge``) is judged from git; GitHub then squashes at exactly that
    head (``expectedHeadOid``), so a push after the judgement makes GitHub refuse. Main gets
    one commit for the brief, with the trailers ``assay merge`` writes (the brief, the head,
    the evidence, the run); the run's checkpoints are kept under its run ref first, over git
    (``keep_run``), so no merged brief is ever without its run. Returns ``(head_sha,
    actions)``; ``Failed`` (exit 1) names every blocking row otherwise.
    """
    key = gate_key()
    if key is None and public_key_from_env() is None:
        raise Failed(
            f"{brief}: merge refused: neither the gate's key ({KEY_ENV}, a repository secret "
            f"only the gate job reads) nor its public key ({PUBLIC_KEY_ENV}, a repository "
            "variable) is set here, so no evidence signature can be checked"
        )
    trusted = merge_key(forge, key, insecure=False)
    ctx, decision = judge_for_merge(forge, brief, key=trusted)
    blocking = decision.blocking()
    if decision.allowed:
        blocking += gate_check_problems(
            forge,
            forge.api,
            trusted,
            brief=brief,
            head_sha=decision.head_sha,
            tip=decision.evidence_tip,
            events=forge.refresh([refs.events_ref(brief)]).get(refs.events_ref(brief)),
        )
    mirror = GitHubMirror(forge)
    state = mirror.state(brief)
    record = ClaimStore(forge).get(brief)
    issue = issue_briefs(forge).briefs.get(brief)
    if issue is not None and issue.pin is not None:
        # The accepted state's record is desk-writable: GitHub's own record of the
        # issue says whether a writer acted after it (a rollback to an older text).
        blocking += rollback_problems(forge.api, issue.pin)
    pull = forge.api.find_pull(f"{refs.BRANCH_PREFIX}{brief}")
    blocking += unrecorded_answers(
        forge,
        brief,
        issue=issue.number if issue is not None else None,
        since=issue.pin.act_at if issue is not None and issue.pin is not None else "",
        pull=int(pull["number"]) if pull is not None else None,
    )
    if not blocking:
        blocking += _record_problems(
            brief, state, claimed=record is not None, issue=issue, pull=pull
        )
    if blocking:
        raise Failed(
            f"{brief}: merge refused at {decision.head_sha[:12]}: " + "; ".join(blocking),
            blocking=blocking,
        )
    review = read_review(forge, brief)
    summary = review.body if review is not None else ""
    body = review_body(brief, issue=state.issue, summary=summary, decision=decision)
    done = dataclasses.replace(record, state="done") if record is not None else None
    if state.pull_state == "draft":
        mirror.finish_review(brief, body=body)
    if state.pull_state != "merged":
        keep_run(forge, ctx, decision.head_sha)
    message = squash_message(ctx, decision.head_sha)
    actions = mirror.merge(
        brief, head_sha=decision.head_sha, body=body, claim=done, message=message
    )
    return decision.head_sha, actions


def mirror_batch(forge: GitHubForge, landed: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """After ``assay merge --ready`` moved main over git with ``landed`` (brief, squash
    commit) pairs: their pull requests closed, claim comments naming the commits, labels
    dropped and issues closed (:meth:`GitHubMirror.close_landed`)."""
    if not landed:
        return {}
    claims = {record.brief: record for record in ClaimStore(forge).list()}
    return GitHubMirror(forge).close_landed(landed, claims=claims)


def _record_problems(
    brief: str,
    state: MirrorState,
    *,
    claimed: bool,
    issue: IssueBrief | None,
    pull: dict[str, Any] | None,
) -> list[str]:
    """Why the refs any job may write do not hold what a merge needs (fail closed).

    The claim must still be there (a deleted one proves nothing about who did the work).
    The mirror record says which pull request to merge and which issue it closes, and any
    job may push it: it must exist and agree with what GitHub itself says (``pull``, the
    open pull request from ``assay/<brief>`` as GitHub listed it, and the issue the brief
    came from)."""
    problems: list[str] = []
    if not claimed:
        problems.append(
            f"the claim {refs.claim_ref(brief)} is gone: a merge needs the claim the brief "
            "was worked under"
        )
    if state.pull is None:
        return [*problems, f"the mirror record {mirror_ref(brief)} names no pull request"]
    found = pull
    if found is None or (int(found["number"]), str(found["node_id"])) != (
        state.pull,
        state.pull_node,
    ):
        actual = f"#{found['number']}" if found is not None else "none"
        problems.append(
            f"the mirror record {mirror_ref(brief)} names pull request #{state.pull}, and "
            f"GitHub's open pull request from assay/{brief} is {actual}"
        )
    if state.issue is not None:
        number = issue.number if issue is not None else None
        if number != state.issue:
            problems.append(
                f"the mirror record {mirror_ref(brief)} names issue #{state.issue}, and the "
                f"brief's issue is {'#' + str(number) if number is not None else 'none'}"
            )
    return problems
