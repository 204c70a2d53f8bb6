"""The GitHub mirror: what git says about a brief, shown where people look on GitHub.

Git is the source of truth (claims, the review record, evidence); this module only reflects
it, paying REST calls for *changes*, never for polling:

- claim -> one label ``assay:claimed`` and one comment on the brief's issue, edited in place
  (the comment's text leaves out the heartbeat clock, so renewals cost nothing);
- review -> a pull request from ``assay/<brief>``: a draft while the run works, opened ready
  for review when it has already finished; finishing a draft regenerates the body, marks it
  ready and updates the claim comment;
- evidence -> the check run ``assay/evidence`` on the head commit, rows in its output;
- merge -> one GraphQL request (final body, a squash at the verified head into one commit on
  main carrying Assay's trailers, comment "done", the label dropped), the run kept under its
  run ref before;
- a batch that landed on main over git (``assay merge --ready``) -> one GraphQL request
  closing every brief's pull request and issue, naming its squash commit in the claim
  comment and dropping its label, the records in one push.

What one sync owes GitHub for a brief goes out as one GraphQL request (``MirrorWrites``):
a desk pass that ends with its review ready costs one content-creating request (label,
comment and ready pull request together), where it cost four. GitHub's secondary limits
count content-creating requests (80 a minute, 500 an hour, REST and GraphQL alike,
docs/github.md "Forge budget"). A request that makes something (a comment, a pull request)
is sent once: after an answer that does not say whether GitHub ran it, the comment is found
by its marker and the pull request by its head, and only what is missing is sent again.

What has been mirrored (issue, comment id, pull request, check runs, digests of what was
last written) is a small record on ``refs/assay/github/<brief>``, appended over git (no REST),
so a desk on a fresh runner edits the same comment and never opens a second pull request.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
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
from assay.github.api import BatchRefused, GitHubApi, Made, Mutation, made
from assay.github.forge import GitHubForge
from assay.github.gatecheck import CHECK_NAME as CHECK_NAME
from assay.github.gatecheck import publish_gate_check
from assay.github.pins import BRIEF_LABEL
from assay.github.rest import WriteUncertain
from assay.ids import check_id
from assay.plumbing import Identity
from assay.states import CLAIM_STATES

MIRROR_PREFIX = refs.GITHUB
MIRROR_KIND = "github-mirror"
CLAIM_LABEL = "assay:claimed"
MIRROR_IDENTITY = Identity(name="assay github mirror", email="github-mirror@assay.invalid")
_INTS = ("issue", "comment_id", "pull")
_STRS = (
    "issue_node",
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
    issue_node: str | None = None  # the issue's GraphQL id (labels and comments name it)
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

    # -- claims and reviews: one GraphQL request per brief (``MirrorWrites``) -------------------

    def writes(self, brief: str) -> MirrorWrites:
        """The writes one brief's mirror owes GitHub, gathered and sent as one request."""
        return MirrorWrites(self, brief)

    def claim(
        self, brief: str, record: ClaimRecord | None, *, issue: int | None = None
    ) -> list[str]:
        """Mirror a claim on the brief's issue; returns the actions taken."""
        writes = self.writes(brief)
        writes.claim(record, issue=issue)
        return writes.send("claim")

    def open_review(
        self, brief: str, *, title: str, branch: str, body: str, ready: bool = False
    ) -> list[str]:
        """Open the pull request from ``branch`` (once; later calls update nothing): a
        draft, or ``ready`` for review when the run has already finished."""
        writes = self.writes(brief)
        writes.open_review(title=title, branch=branch, body=body, ready=ready)
        return writes.send("review")

    def update_review_body(self, brief: str, *, body: str) -> list[str]:
        """Regenerate a pull request's body when it changed (one request, else none)."""
        writes = self.writes(brief)
        writes.update_review_body(body)
        return writes.send("review body")

    def finish_review(
        self, brief: str, *, body: str, claim: ClaimRecord | None = None
    ) -> list[str]:
        """Regenerate the body, mark the pull request ready, refresh the claim comment: one
        GraphQL request."""
        writes = self.writes(brief)
        writes.finish_review(body=body, claim=claim)
        return writes.send("review, ready for review,")

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
        body, the claim comment and the claim label dropped, in one GraphQL request."""
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
        unlabel = self._unlabel(state)
        self.api.batch(mutations + unlabel)
        actions = [m.name for m in mutations] + ["label-"] * len(unlabel)
        state.pull_state, state.merged_sha, state.body_digest = "merged", head_sha, _digest(body)
        if comment and state.comment_node:
            state.claim_digest = _digest(comment)
        state.label = state.label and not unlabel
        self._save(state, f"mirror merge of {brief} at {head_sha[:12]}")
        return actions

    def issue_node(self, state: MirrorState) -> str | None:
        """The GraphQL id of ``state``'s issue: the record's, else from the open ``assay``
        issues (one conditional list, which the desk or the sync has just read), else the
        issue itself (one conditional read)."""
        if state.issue is None or state.issue_node is not None:
            return state.issue_node
        listed = {int(i["number"]): i for i in self.api.open_issues(BRIEF_LABEL)}
        found = listed.get(state.issue) or self.api.issue(state.issue)
        state.issue_node = str(found["node_id"])
        return state.issue_node

    def _unlabel(self, state: MirrorState) -> list[Mutation]:
        """The mutation dropping the claim label from ``state``'s issue, when it has it."""
        node = self.issue_node(state) if state.label else None
        if node is None:
            return []
        label = self.api.label_node(CLAIM_LABEL)
        return [Mutation("removeLabelsFromLabelable", {"labelableId": node, "labelIds": [label]})]

    # -- a batch merged over git ----------------------------------------------------------------

    def close_landed(
        self, landed: Sequence[tuple[str, str]], *, claims: Mapping[str, ClaimRecord]
    ) -> dict[str, list[str]]:
        """After a batch moved main over git (``assay.evidence.batch``): each ``(brief,
        squash commit)``'s pull request and issue closed, its claim comment naming the commit
        and its label dropped, all in one GraphQL request, and the mirror records written in
        one push. Briefs with no open pull request are left alone; returns the actions per
        brief."""
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
            actions[brief] = [m.name for m in mine]
            unlabel = self._unlabel(state)
            if unlabel:
                mine += unlabel
                actions[brief].append("label-")
                state.label = False
            node = self.issue_node(state)
            if node is not None:
                mine.append(Mutation("closeIssue", {"issueId": node, "stateReason": "COMPLETED"}))
                actions[brief].append("issue-")
            mutations += mine
            state.pull_state, state.merged_sha = "merged", commit
            touched.append(state)
        self.api.batch(mutations)
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


@dataclass
class _Write:
    """One mutation a brief's mirror owes GitHub, what it is called in ``--json``, how the
    record takes it once GitHub has done it, and, for one that makes something, how to find
    what it made after an answer that does not say whether it did."""

    mutation: Mutation
    action: str
    record: Callable[[MirrorState, Made | None], None]
    find: Callable[[], Made | None] | None = None


class MirrorWrites:
    """The writes one brief's mirror owes GitHub, decided against the record as they will
    leave it (``plan``) and sent as one GraphQL request by ``send``, which records what
    GitHub did (``state``) in one push of the mirror record."""

    def __init__(self, mirror: GitHubMirror, brief: str) -> None:
        self.mirror = mirror
        self.api = mirror.api
        self.brief = brief
        self.state = mirror.state(brief)  # what GitHub has: saved by ``send``
        self.plan = copy.deepcopy(self.state)  # what it will have once the writes are done
        self.pending: list[_Write] = []
        self.done: list[str] = []  # the actions GitHub has done

    def _add(
        self,
        name: str,
        fields: dict[str, Any],
        action: str,
        record: Callable[[MirrorState, Made | None], None],
        find: Callable[[], Made | None] | None = None,
    ) -> None:
        self.pending.append(_Write(Mutation(name, fields), action, record, find))

    def _pending_pull(self) -> Mutation | None:
        return next(
            (
                w.mutation
                for w in self.pending
                if w.mutation.creates and w.mutation.name == "createPullRequest"
            ),
            None,
        )

    def claim(self, record: ClaimRecord | None, *, issue: int | None = None) -> None:
        """The claim label (while the claim holds) and the claim comment on the issue."""
        if issue is not None:
            self.state.issue = self.plan.issue = issue
        if self.plan.issue is None:
            return  # a brief from briefs/*.md has no issue to mirror on
        number = self.plan.issue
        text, plan = claim_comment(self.brief, record), self.plan
        live = record is not None and _claim_holds(record.state)
        if live != plan.label and (live or (record is not None and record.state != "done")):
            node = self._issue_node()
            label = self.api.label_node(CLAIM_LABEL)
            plan.label = live

            def labelled(state: MirrorState, _: Made | None) -> None:
                state.label = live

            self._add(
                "addLabelsToLabelable" if live else "removeLabelsFromLabelable",
                {"labelableId": node, "labelIds": [label]},
                "label+" if live else "label-",
                labelled,
            )
        digest = _digest(text)
        if plan.claim_digest == digest:
            return
        plan.claim_digest = digest
        if plan.comment_node is None:

            def commented(state: MirrorState, comment: Made | None) -> None:
                assert comment is not None
                state.comment_id, state.comment_node = comment.number, comment.node
                state.claim_digest = digest

            def find() -> Made | None:
                found = self.api.find_comment(number, text)
                return None if found is None else Made(str(found["node_id"]), int(found["id"]))

            self._add(
                "addComment",
                {"subjectId": self._issue_node(), "body": text},
                "comment+",
                commented,
                find,
            )
        else:
            self._comment(text, digest, "comment~")

    def _comment(self, text: str, digest: str, action: str) -> None:
        def edited(state: MirrorState, _: Made | None) -> None:
            state.claim_digest = digest

        assert self.plan.comment_node is not None
        self._add(
            "updateIssueComment", {"id": self.plan.comment_node, "body": text}, action, edited
        )

    def _issue_node(self) -> str:
        node = self.mirror.issue_node(self.plan)
        assert node is not None  # the plan names an issue
        self.state.issue_node = node
        return node

    def open_review(self, *, title: str, branch: str, body: str, ready: bool) -> None:
        """The pull request from ``branch``, once: a draft, or ``ready`` for review."""
        if self.plan.pull is not None or self._pending_pull() is not None:
            return
        fields = {
            "repositoryId": self.api.repository_node(),
            "baseRefName": "main",
            "headRefName": branch,
            "title": title,
            "body": body,
            "draft": not ready,
        }

        def opened(state: MirrorState, pull: Made | None) -> None:
            assert pull is not None
            state.pull, state.pull_node = pull.number, pull.node
            state.pull_state = "draft" if fields["draft"] else "ready"
            state.body_digest = _digest(str(fields["body"]))

        def find() -> Made | None:
            found = self.api.find_pull(branch)
            return None if found is None else Made(str(found["node_id"]), int(found["number"]))

        self.plan.pull_state, self.plan.body_digest = ("ready" if ready else "draft"), _digest(body)
        self._add("createPullRequest", fields, "pull+", opened, find)

    def update_review_body(self, body: str) -> None:
        """The pull request's body, when it changed."""
        self._body(body, "body~")

    def _body(self, body: str, action: str) -> None:
        digest = _digest(body)
        if self.plan.body_digest == digest:
            return
        self.plan.body_digest = digest
        pending = self._pending_pull()
        if pending is not None:  # opened by this request: with this body
            pending.input["body"] = body
            return
        if self.plan.pull_node is None:
            return

        def rewritten(state: MirrorState, _: Made | None) -> None:
            state.body_digest = digest

        self._add(
            "updatePullRequest",
            {"pullRequestId": self.plan.pull_node, "body": body},
            action,
            rewritten,
        )

    def finish_review(self, *, body: str, claim: ClaimRecord | None = None) -> None:
        """The final body, ready for review, and the claim comment saying where it stands."""
        pending = self._pending_pull()
        if self.plan.pull_node is None and pending is None:
            raise BadInput(
                f"brief {self.brief!r} has no pull request to finish (open_review first)"
            )
        self._body(body, "updatePullRequest")
        if pending is not None:
            pending.input["draft"] = False
        elif self.plan.pull_state == "draft":

            def readied(state: MirrorState, _: Made | None) -> None:
                state.pull_state = "ready"

            self._add(
                "markPullRequestReadyForReview",
                {"pullRequestId": self.plan.pull_node},
                "markPullRequestReadyForReview",
                readied,
            )
        self.plan.pull_state = "ready"
        comment = claim_comment(self.brief, claim) if claim is not None else None
        if comment and self.plan.comment_node and self.plan.claim_digest != _digest(comment):
            self.plan.claim_digest = _digest(comment)
            self._comment(comment, _digest(comment), "updateIssueComment")

    def send(self, what: str) -> list[str]:
        """Send what is owed in one request and record what GitHub did; the actions taken.

        A mutation GitHub refused leaves the others done (they are recorded, then the
        refusal raised). An answer that does not say whether GitHub ran a request that
        makes something: each thing made is looked for (the comment by its marker, the pull
        request by its head), and what is not found is sent once more, with the rest."""
        if not self.pending:
            return []
        pending = list(self.pending)
        try:
            try:
                answers = self.api.batch([w.mutation for w in pending])
            except WriteUncertain:
                pending = self._reconcile(pending)
                answers = self.api.batch([w.mutation for w in pending])
        except BatchRefused as refused:
            self._record(pending, refused.done, what)
            raise
        except WriteUncertain:
            self._save(what)
            raise
        return self._record(pending, answers, what)

    def _reconcile(self, pending: list[_Write]) -> list[_Write]:
        """What is still owed after an unclear answer: every write but the things found
        made (recorded as made)."""
        owed = []
        for owing in pending:
            found = owing.find() if owing.find is not None else None
            if found is None:
                owed.append(owing)
                continue
            owing.record(self.state, found)
            self.done.append(owing.action)
        return owed

    def _record(
        self, pending: list[_Write], answers: Sequence[dict[str, Any] | None], what: str
    ) -> list[str]:
        for sent, answer in zip(pending, answers, strict=True):
            if answer is None:
                continue
            name = sent.mutation.name
            sent.record(self.state, made(name, answer) if sent.mutation.creates else None)
            self.done.append(sent.action)
        self._save(what)
        return list(self.done)

    def _save(self, what: str) -> None:
        if self.done:
            message = f"mirror {what} of {self.brief}: {' '.join(self.done)}"
            self.mirror._save(self.state, message)
