"""The GitHub mirror: what git says about a brief, shown where people look on GitHub.

Git is the source of truth (claims, the review record, evidence); this module only reflects
it, paying REST calls for *changes*, never for polling:

- claim -> one label ``assay:claimed`` and one comment on the brief's issue, edited in place
  (the comment's text leaves out the heartbeat clock, so renewals cost nothing);
- review -> a draft pull request from ``assay/<brief>``; finishing it regenerates the body,
  marks it ready for review and updates the claim comment in one GraphQL request;
- evidence -> the check run ``assay/evidence`` on the head commit, rows in its output;
- merge -> one GraphQL request (final body, a squash at the verified head into one commit on
  main carrying Assay's trailers, comment "done"), the run kept under its run ref before;
- a batch that landed on main over git (``assay merge --ready``) -> one GraphQL request
  closing every brief's pull request and naming its squash commit in the claim comment,
  then the label dropped and the issue closed per brief, the records in one push.

What has been mirrored (issue, comment id, pull request, check runs, digests of what was
last written) is a small record on ``refs/assay/github/<brief>``, appended over git (no REST),
so a desk on a fresh runner edits the same comment and never opens a second pull request.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import assay.refs as refs
from assay.claims import ClaimRecord
from assay.errors import BadInput
from assay.evidence.keys import GateKey
from assay.evidence.rule import MergeDecision, Verdict
from assay.evidence.table import render_markdown, with_table
from assay.forge import RefLog
from assay.forge.records import RecordCodec, Stage, WritePolicy, write
from assay.github.api import GitHubApi, Mutation
from assay.github.forge import GitHubForge
from assay.github.gatecheck import CHECK_NAME as CHECK_NAME
from assay.github.gatecheck import publish_gate_check
from assay.ids import check_id
from assay.plumbing import Identity
from assay.states import CLAIM_STATES

MIRROR_PREFIX = refs.GITHUB
MIRROR_KIND = "github-mirror"
CLAIM_LABEL = "assay:claimed"
MIRROR_IDENTITY = Identity(name="assay github mirror", email="github-mirror@assay.invalid")
_INTS = ("issue", "comment_id", "pull")
_STRS = (
    "comment_node",
    "pull_node",
    "pull_state",
    "claim_digest",
    "body_digest",
    "merged_sha",
    "gate_sha",
)


def mirror_ref(brief: str) -> str:
    return MIRROR_PREFIX + check_id(brief)


@dataclass
class MirrorState:
    """What has been written to GitHub for one brief (stored on ``refs/assay/github/<brief>``)."""

    brief: str
    issue: int | None = None
    comment_id: int | None = None
    comment_node: str | None = None
    label: bool = False
    claim_digest: str | None = None
    pull: int | None = None
    pull_node: str | None = None
    pull_state: str | None = None  # draft | ready | merged | closed
    body_digest: str | None = None
    check_runs: dict[str, int] = field(default_factory=dict)  # head sha -> check run id
    merged_sha: str | None = None
    gate_sha: str | None = None  # the head the gate workflow was last dispatched for

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MirrorState:
        _validate(dict(data))
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


def mirror_codec(brief: str) -> RecordCodec:
    """The mirror record's codec: ``record.json`` on ``refs/assay/github/<brief>``."""
    return RecordCodec(mirror_ref(brief), MIRROR_KIND, validate=_validate)


def _validate(record: dict[str, Any]) -> None:
    check_id(str(record.get("brief", "")), what="brief id")
    for key in _INTS:
        if record.get(key) is not None and not isinstance(record[key], int):
            raise BadInput(f"field {key!r} must be an integer or null")
    for key in _STRS:
        if record.get(key) is not None and not isinstance(record[key], str):
            raise BadInput(f"field {key!r} must be a string or null")
    runs = record.get("check_runs", {})
    if not isinstance(runs, dict) or not all(isinstance(v, int) for v in runs.values()):
        raise BadInput("field 'check_runs' must map head shas to check run ids")


def _claim_holds(state: str) -> bool:
    """Whether a claim in ``state`` is still held by its desk (the issue keeps the label)."""
    rule = CLAIM_STATES.get(state)
    return rule is not None and rule.holds


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# How the issue comment words each claim state. A state without a sentence of its own (one
# added to ``assay.states.CLAIM_STATES``) is named as it is, never mistaken for another.
_CLAIM_SENTENCES = {
    "held": "is **held** by {who} since {since}.",
    "waiting": "is **waiting** for `{until}`; held by {who}.",
    "done": "is **done** ({who}).",
    "stuck": "is **stuck**: {who} stopped renewing its lease.",
    "released": "was **released** by {who}; any desk may resume it.",
}


def claim_comment(brief: str, record: ClaimRecord | None, *, note: str = "") -> str:
    """The mirror comment's text; no heartbeat clock in it, so renewals change nothing."""
    marker = f"<!-- assay:claim brief={brief} -->"
    if record is None:
        line = f"Brief `{brief}` is not claimed."
    else:
        who = f"desk `{record.desk}` (holder `{record.holder[:8]}`, fence {record.fence})"
        line = f"Brief `{brief}` " + _CLAIM_SENTENCES.get(
            record.state, "is **{state}** ({who})."
        ).format(state=record.state, who=who, since=record.since, until=record.waiting_for)
        if record.note:
            line += f"\n\n> {record.note}"
    if note:
        line += f"\n\n{note}"
    return f"{marker}\n**Assay** · {line}\n"


def review_body(
    brief: str, *, issue: int | None, summary: str, decision: MergeDecision | None
) -> str:
    """The pull request body: the review's own body, its evidence block as the gate wrote
    it there at its last verify (``decision`` None: what a sync shows, judging nothing), or
    replaced by ``decision``'s table (the merge's own judgement, as it merges), rendered by
    the one renderer of the verdict (``assay.evidence.table``)."""
    parts = [f"<!-- assay:review brief={brief} -->"]
    if issue is not None:
        parts.append(f"Closes #{issue}")
    text = summary.strip() or f"Work on brief `{brief}`."
    parts.append(text if decision is None else with_table(text, render_markdown(decision)))
    return "\n\n".join(parts)


class GitHubMirror:
    """Mirrors one forge's git state onto its GitHub repository (see module docstring)."""

    def __init__(self, forge: GitHubForge, *, identity: Identity = MIRROR_IDENTITY) -> None:
        self.forge = forge
        self.api: GitHubApi = forge.api
        self.identity = identity

    # -- the mirror record -----------------------------------------------------------------

    def _log(self, brief: str) -> RefLog:
        return RefLog.of(self.forge, mirror_codec(brief))

    def state(self, brief: str) -> MirrorState:
        record = self._log(brief).latest()
        return MirrorState(brief=brief) if record is None else MirrorState.from_json(record)

    def states(self) -> dict[str, MirrorState]:
        """Every brief's mirror record, in one fetch."""
        found: dict[str, MirrorState] = {}
        for ref in sorted(self.forge.refresh(MIRROR_PREFIX)):
            brief = ref[len(MIRROR_PREFIX) :]
            record = self._log(brief).latest(fetch=False)
            if record is not None:
                found[brief] = MirrorState.from_json(record)
        return found

    def _save(self, state: MirrorState, message: str) -> None:
        self._log(state.brief).append(state.to_json(), author=self.identity, message=message)

    # -- claims ------------------------------------------------------------------------------

    def claim(
        self, brief: str, record: ClaimRecord | None, *, issue: int | None = None
    ) -> list[str]:
        """Mirror a claim on the brief's issue; returns the REST actions taken."""
        state = self.state(brief)
        state.issue = issue if issue is not None else state.issue
        if state.issue is None:
            return []  # a brief from briefs/*.md has no issue to mirror on
        actions: list[str] = []
        text = claim_comment(brief, record)
        live = record is not None and _claim_holds(record.state)
        if live and not state.label:
            self.api.add_label(state.issue, CLAIM_LABEL)
            state.label = True
            actions.append("label+")
        elif not live and state.label and record is not None and record.state != "done":
            self.api.remove_label(state.issue, CLAIM_LABEL)
            state.label = False
            actions.append("label-")
        if state.claim_digest != _digest(text):
            if state.comment_id is None:
                made = self.api.create_comment(state.issue, text)
                state.comment_id, state.comment_node = int(made["id"]), str(made["node_id"])
                actions.append("comment+")
            else:
                self.api.update_comment(state.comment_id, text)
                actions.append("comment~")
            state.claim_digest = _digest(text)
        if actions:
            self._save(state, f"mirror claim of {brief}: {' '.join(actions)}")
        return actions

    # -- reviews -----------------------------------------------------------------------------

    def open_review(self, brief: str, *, title: str, branch: str, body: str) -> list[str]:
        """Open the draft pull request from ``branch`` (once; later calls update nothing)."""
        state = self.state(brief)
        if state.pull is not None:
            return []
        made = self.api.create_pull(title=title, head=branch, base="main", body=body, draft=True)
        state.pull, state.pull_node = int(made["number"]), str(made["node_id"])
        state.pull_state, state.body_digest = "draft", _digest(body)
        self._save(state, f"mirror review of {brief}: draft pull request #{state.pull}")
        return ["pull+"]

    def update_review_body(self, brief: str, *, body: str) -> list[str]:
        """Regenerate a pull request's body when it changed (one REST call, else none)."""
        state = self.state(brief)
        if state.pull is None or state.body_digest == _digest(body):
            return []
        self.api.update_pull_body(state.pull, body)
        state.body_digest = _digest(body)
        self._save(state, f"mirror review body of {brief}")
        return ["body~"]

    def finish_review(
        self, brief: str, *, body: str, claim: ClaimRecord | None = None
    ) -> list[str]:
        """Regenerate the body, mark the pull request ready, refresh the claim comment: one
        GraphQL request."""
        state = self.state(brief)
        if state.pull_node is None:
            raise BadInput(f"brief {brief!r} has no pull request to finish (open_review first)")
        mutations: list[Mutation] = []
        if state.body_digest != _digest(body):
            mutations.append(
                Mutation("updatePullRequest", {"pullRequestId": state.pull_node, "body": body})
            )
        if state.pull_state == "draft":
            mutations.append(
                Mutation("markPullRequestReadyForReview", {"pullRequestId": state.pull_node})
            )
        comment = claim_comment(brief, claim) if claim is not None else None
        if comment and state.comment_node and state.claim_digest != _digest(comment):
            mutations.append(
                Mutation("updateIssueComment", {"id": state.comment_node, "body": comment})
            )
        if not mutations:
            return []
        self.api.batch(mutations)
        state.body_digest, state.pull_state = _digest(body), "ready"
        if comment and state.comment_node:
            state.claim_digest = _digest(comment)
        self._save(state, f"mirror review of {brief}: ready for review")
        return [m.name for m in mutations]

    def dispatch_gate(
        self, brief: str, *, workflow: str, head_sha: str, again: bool = False
    ) -> list[str]:
        """Start the gate for ``head_sha`` once (GITHUB_TOKEN pushes start no workflow), or
        ``again`` when something the verdict counts besides the rows changed (an answer)."""
        state = self.state(brief)
        if state.gate_sha == head_sha and not again:
            return []
        self.api.dispatch(workflow, inputs={"brief": brief, "sha": head_sha})
        state.gate_sha = head_sha
        self._save(state, f"mirror gate dispatch of {brief} at {head_sha[:12]}")
        return ["gate>"]

    # -- evidence ------------------------------------------------------------------------------

    def publish_evidence(
        self,
        brief: str,
        *,
        decision: MergeDecision,
        key: GateKey | None = None,
    ) -> int:
        """The merge rule's ``decision`` as the check run ``assay/evidence`` on its head,
        signed with ``key`` over the verdict and the evidence tip (``assay.github.gatecheck``);
        its text is the review's table (``assay.evidence.table``).

        What is already published is re-read from GitHub, not from this record (a desk can
        write it): an unchanged verdict writes nothing, a changed one publishes a newer run.
        """
        head_sha, rows, passed = decision.head_sha, decision.rows, decision.allowed
        failing = [status.row for status in rows if status.verdict is not Verdict.PASS]
        summary = (
            f"{len(rows)} of {len(rows)} rows verified passing at {head_sha[:12]}"
            if passed
            else f"rows not verified passing at {head_sha[:12]}: {', '.join(failing) or 'none run'}"
        )
        run_id, written = publish_gate_check(
            self.api,
            brief=brief,
            head_sha=head_sha,
            passed=passed,
            tip=decision.evidence_tip,
            events=self.forge.refresh([refs.events_ref(brief)]).get(refs.events_ref(brief)),
            title=f"{brief}: {'verified' if passed else 'not verified'}",
            summary=summary,
            text=render_markdown(decision),
            key=key,
        )
        if written:
            state = self.state(brief)
            state.check_runs[head_sha] = run_id  # for people reading the record; never read back
            self._save(state, f"mirror evidence of {brief} at {head_sha[:12]}")
        return run_id

    # -- merge ---------------------------------------------------------------------------------

    def merge(
        self,
        brief: str,
        *,
        head_sha: str,
        body: str,
        message: str,
        claim: ClaimRecord | None = None,
    ) -> list[str]:
        """Squash the pull request at ``head_sha`` (GitHub refuses if the head moved) into one
        commit on main whose message is ``message`` (its first line the headline, the rest
        its body: the trailers naming the brief, its evidence and its run), with the final
        body and the claim comment, in one GraphQL request; then drop the label."""
        state = self.state(brief)
        if state.pull_node is None:
            raise BadInput(f"brief {brief!r} has no pull request to merge")
        if state.pull_state == "merged":
            return []
        headline, _, rest = message.partition("\n")
        mutations = []
        if state.body_digest != _digest(body):
            mutations.append(
                Mutation("updatePullRequest", {"pullRequestId": state.pull_node, "body": body})
            )
        mutations.append(
            Mutation(
                "mergePullRequest",
                {
                    "pullRequestId": state.pull_node,
                    "expectedHeadOid": head_sha,
                    "mergeMethod": "SQUASH",
                    "commitHeadline": headline,
                    "commitBody": rest.strip("\n"),
                },
            )
        )
        comment = claim_comment(brief, claim, note="Merged.") if claim is not None else None
        if comment and state.comment_node:
            mutations.append(
                Mutation("updateIssueComment", {"id": state.comment_node, "body": comment})
            )
        self.api.batch(mutations)
        actions = [m.name for m in mutations]
        state.pull_state, state.merged_sha, state.body_digest = "merged", head_sha, _digest(body)
        if comment and state.comment_node:
            state.claim_digest = _digest(comment)
        if state.label and state.issue is not None:
            self.api.remove_label(state.issue, CLAIM_LABEL)
            state.label = False
            actions.append("label-")
        self._save(state, f"mirror merge of {brief} at {head_sha[:12]}")
        return actions

    # -- a batch merged over git ----------------------------------------------------------------

    def close_landed(
        self, landed: Sequence[tuple[str, str]], *, claims: Mapping[str, ClaimRecord]
    ) -> dict[str, list[str]]:
        """After a batch moved main over git (``assay.evidence.batch``): each ``(brief,
        squash commit)``'s pull request closed and its claim comment naming the commit, all in
        one GraphQL request; then its label dropped and its issue closed (one REST call each),
        and the mirror records written in one push. Briefs with no open pull request are left
        alone; returns the actions per brief."""
        states = self.states()
        mutations: list[Mutation] = []
        touched: list[MirrorState] = []
        actions: dict[str, list[str]] = {}
        for brief, commit in landed:
            state = states.get(brief)
            if state is None or state.pull_node is None or state.pull_state in _ENDED:
                continue
            mine = [
                Mutation("updatePullRequest", {"pullRequestId": state.pull_node, "state": "CLOSED"})
            ]
            claim = claims.get(brief)
            if claim is not None and state.comment_node:
                done = dataclasses.replace(claim, state="done")
                comment = claim_comment(brief, done, note=f"Merged as {commit[:12]} in a batch.")
                mine.append(
                    Mutation("updateIssueComment", {"id": state.comment_node, "body": comment})
                )
                state.claim_digest = _digest(comment)
            mutations += mine
            actions[brief] = [m.name for m in mine]
            state.pull_state, state.merged_sha = "merged", commit
            touched.append(state)
        self.api.batch(mutations)
        for state in touched:
            if state.label and state.issue is not None:
                self.api.remove_label(state.issue, CLAIM_LABEL)
                state.label = False
                actions[state.brief].append("label-")
            if state.issue is not None:
                self.api.close_issue(state.issue)
                actions[state.brief].append("issue-")
        self._save_all(touched, "mirror batch merge")
        return actions

    def _save_all(self, states: Sequence[MirrorState], message: str) -> None:
        """Every state's record in one atomic push, each on its log's tip (read again and
        appended on top after a lost race: a mirror record holds the whole state)."""
        if not states:
            return

        def build(_again: bool) -> Stage:
            tips = self.forge.refresh(MIRROR_PREFIX)
            stage = Stage(self.forge)
            for state in states:
                codec = mirror_codec(state.brief)
                stage.record(
                    codec,
                    state.to_json(),
                    on=tips.get(codec.ref),
                    author=self.identity,
                    message=f"{message}: {state.brief}",
                )
            return stage

        write(self.forge, build, policy=WritePolicy(what="mirror record"))


_ENDED = ("merged", "closed")
