"""``assay github sync``: reconcile GitHub with what git says, paying only for differences.

The desk loop, the gate and the sweepers write claims, review records and evidence to git,
the same on every forge. This module reads them (git only: claims in one fetch, each
brief's review record and evidence log) and brings GitHub in line through
``GitHubMirror``: the claim label and comment, the draft pull request (opened, body
regenerated, made ready for review), the ``assay/evidence`` check run. The mirror's own
record says what was written last, so a sync with nothing new costs no REST call at all.

``parts`` limits a sync to what a workflow's token may do: the gate runs with
``checks: write`` only, so it syncs ``evidence`` alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from assay.claims import ClaimRecord, ClaimStore
from assay.desks.records.review import Review, read_review
from assay.errors import Failed
from assay.evidence.gate import merge_decision
from assay.evidence.keys import KEY_ENV, PUBLIC_KEY_ENV, gate_key, public_key_from_env
from assay.evidence.rule import MergeDecision
from assay.evidence.trust import merge_key
from assay.github.forge import GitHubForge
from assay.github.issues import load_issue_briefs
from assay.github.mirror import (
    CHECK_NAME,
    GATE_WORKFLOW,
    GitHubMirror,
    MirrorState,
    review_body,
)

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

    With ``gate_workflow``, a review that is ready at a head the gate has not been started
    for gets one ``workflow_dispatch`` of that workflow (inputs ``brief`` and ``sha``).
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
        actions: list[str] = []
        state = states.get(brief) or mirror.state(brief)
        if "claims" in wanted:
            issue = state.issue if state.issue is not None else issues.get(brief)
            actions += mirror.claim(brief, claims.get(brief), issue=issue)
            state = mirror.state(brief)
        review = read_review(forge, brief) if wanted & {"reviews", "evidence"} else None
        decision, rows = _judged_rows(forge, brief, review, report)
        if "reviews" in wanted and review is not None:
            actions += _sync_review(
                mirror,
                brief,
                review,
                state,
                rows,
                claim=claims.get(brief),
                gate_workflow=gate_workflow,
            )
        if "evidence" in wanted and decision is not None and any(r.get("verified") for r in rows):
            actions += _publish_evidence(mirror, brief, decision, rows)
        report.actions[brief] = actions
    return report


class _IssueNumbers:
    """Issue numbers by brief: one conditional list call for the whole sync, made only when
    some brief's mirror record does not already know its issue."""

    def __init__(self, forge: GitHubForge) -> None:
        self._forge = forge
        self._numbers: dict[str, int] | None = None

    def get(self, brief: str) -> int | None:
        if self._numbers is None:
            found = load_issue_briefs(self._forge.api).briefs
            self._numbers = {key: value.number for key, value in found.items()}
        return self._numbers.get(brief)


def _judged_rows(
    forge: GitHubForge, brief: str, review: Review | None, report: SyncReport
) -> tuple[MergeDecision | None, list[dict[str, Any]]]:
    """The merge rule's decision and its rows as JSON (none without a review)."""
    if review is None:
        return None, []
    try:
        decision = merge_decision(forge, brief)
    except Exception as exc:  # a sync reports evidence it cannot judge; it goes on
        report.problems[brief] = f"{type(exc).__name__}: {exc}"
        return None, []
    return decision, [row.to_json() for row in decision.rows]


def _sync_review(
    mirror: GitHubMirror,
    brief: str,
    review: Review,
    state: MirrorState,
    rows: list[dict[str, Any]],
    *,
    claim: ClaimRecord | None,
    gate_workflow: str | None,
) -> list[str]:
    """Open, regenerate or ready the pull request; dispatch the gate for a ready head."""
    actions: list[str] = []
    body = review_body(brief, issue=state.issue, summary=review.body, rows=rows)
    if state.pull is None:
        actions += mirror.open_review(brief, title=review.title, branch=review.branch, body=body)
    if review.state == "ready":
        actions += mirror.finish_review(brief, body=body, claim=claim)
        if gate_workflow:
            actions += mirror.dispatch_gate(brief, workflow=gate_workflow, head_sha=review.head_sha)
    else:
        actions += mirror.update_review_body(brief, body=body)
    return actions


def _publish_evidence(
    mirror: GitHubMirror, brief: str, decision: MergeDecision, rows: list[dict[str, Any]]
) -> list[str]:
    """The ``assay/evidence`` check run at the decision's head (``check+`` when new)."""
    before = dict(mirror.state(brief).check_runs)
    mirror.publish_evidence(brief, head_sha=decision.head_sha, rows=rows, passed=decision.allowed)
    return ["check+"] if decision.head_sha not in before else []


def gate_check_problems(forge: GitHubForge, brief: str, head_sha: str) -> list[str]:
    """Why ``head_sha`` lacks an ``assay/evidence`` check run from the gate workflow.

    The name alone proves nothing (any workflow can make a check run called that): the run
    must be a success whose ``external_id`` names a workflow run of ``GATE_WORKFLOW``, as
    GitHub itself reports that run.
    """
    seen: list[str] = []
    for check in forge.api.check_runs(head_sha, name=CHECK_NAME):
        external = str(check.get("external_id") or "")
        named, _, run_id = external.rpartition(":")
        if named != brief or not run_id.isdigit():
            seen.append(f"check run {check.get('id')} names no gate workflow run")
            continue
        run = forge.api.workflow_run(int(run_id))
        if run.get("path") != GATE_WORKFLOW:
            seen.append(f"check run {check.get('id')} came from {run.get('path') or 'no workflow'}")
            continue
        if check.get("conclusion") == "success":
            return []
        seen.append(f"the gate's check run {check.get('id')} is {check.get('conclusion')}")
    detail = f" ({'; '.join(seen)})" if seen else ""
    return [f"no successful {CHECK_NAME} check run from {GATE_WORKFLOW} at {head_sha[:12]}{detail}"]


def merge_on_github(forge: GitHubForge, brief: str) -> tuple[str, list[str]]:
    """Merge ``brief``'s pull request when the merge rule allows it at the current head.

    The rule (``merge_decision``) is judged from git; GitHub then merges at exactly that
    head (``expectedHeadOid``), so a push after the judgement makes GitHub refuse. Returns
    ``(head_sha, actions)``; ``Failed`` (exit 1) names every blocking row otherwise.
    """
    key = gate_key()
    if key is None and public_key_from_env() is None:
        raise Failed(
            f"{brief}: merge refused: neither the gate's key ({KEY_ENV}, a repository secret "
            f"only the gate job reads) nor its public key ({PUBLIC_KEY_ENV}, a repository "
            "variable) is set here, so no evidence signature can be checked"
        )
    decision = merge_decision(forge, brief, key=merge_key(forge, key, insecure=False))
    blocking = decision.blocking()
    if decision.allowed:
        blocking += gate_check_problems(forge, brief, decision.head_sha)
    if blocking:
        raise Failed(
            f"{brief}: merge refused at {decision.head_sha[:12]}: " + "; ".join(blocking),
            blocking=blocking,
        )
    mirror = GitHubMirror(forge)
    state = mirror.state(brief)
    review = read_review(forge, brief)
    summary = review.body if review is not None else ""
    rows = [row.to_json() for row in decision.rows]
    body = review_body(brief, issue=state.issue, summary=summary, rows=rows)
    record = ClaimStore(forge).get(brief)
    done = dataclasses.replace(record, state="done") if record is not None else None
    if state.pull_state == "draft":
        mirror.finish_review(brief, body=body)
    return decision.head_sha, mirror.merge(brief, head_sha=decision.head_sha, body=body, claim=done)
