"""``GitHubApi``: the GitHub operations Assay uses, each one REST (or GraphQL) call.

A thin typed layer over ``RestClient`` for one repository. Nothing here decides *when* to
call; that is ``assay.github.mirror`` (claims, reviews, evidence) and ``assay.github.events``.
Where GitHub offers no REST endpoint (ready-for-review) or where several edits belong
together (a claim's label and comment with its pull request; a merge with its comment and
the label's removal), they go in one GraphQL request: GitHub's secondary limits count
content-creating *requests* (80 a minute, 500 an hour, REST and GraphQL alike), so a batch
of mutations is one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from assay.github.rest import GitHubNotFound, GitHubRefused, RestClient

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})

# GraphQL mutations a batch may hold, and the input type each one takes.
_MUTATION_INPUTS = {
    "addComment": "AddCommentInput",
    "addLabelsToLabelable": "AddLabelsToLabelableInput",
    "closeIssue": "CloseIssueInput",
    "createPullRequest": "CreatePullRequestInput",
    "markPullRequestReadyForReview": "MarkPullRequestReadyForReviewInput",
    "mergePullRequest": "MergePullRequestInput",
    "removeLabelsFromLabelable": "RemoveLabelsFromLabelableInput",
    "updateIssueComment": "UpdateIssueCommentInput",
    "updatePullRequest": "UpdatePullRequestInput",
}
# What a mutation that makes something answers with: the new object's node id and number.
_MADE = {
    "addComment": "commentEdge { node { id databaseId } }",
    "createPullRequest": "pullRequest { id number }",
}


@dataclass(frozen=True)
class Mutation:
    """One GraphQL mutation of a batch: its field name and its ``input`` object."""

    name: str
    input: dict[str, Any]

    @property
    def creates(self) -> bool:
        """Whether it makes something (a comment, a pull request): sent twice, two."""
        return self.name in _MADE


@dataclass(frozen=True)
class Made:
    """What a mutation that makes something made: its node id and its number (a comment's
    database id, a pull request's number)."""

    node: str
    number: int


class BatchRefused(GitHubRefused):
    """GitHub ran a batch and refused some of its mutations (the others ran, in order):
    ``done`` holds every mutation's answer, None for a refused one."""

    def __init__(self, message: str, *, done: list[dict[str, Any] | None]) -> None:
        super().__init__(message)
        self.done = done


def made(name: str, answer: dict[str, Any] | None) -> Made | None:
    """The object a creating mutation's ``answer`` names (None: it made nothing)."""
    if answer is None:
        return None
    if name == "addComment":
        node = (answer.get("commentEdge") or {}).get("node") or {}
        return Made(str(node["id"]), int(node["databaseId"])) if node else None
    pull = answer.get("pullRequest") or {}
    return Made(str(pull["id"]), int(pull["number"])) if pull else None


class GitHubApi:
    """Typed calls for ``owner/repo``; the REST counters live on ``rest.stats``."""

    def __init__(self, rest: RestClient, owner: str, repo: str) -> None:
        self.rest = rest
        self.owner = owner
        self.repo = repo
        self.base = f"/repos/{owner}/{repo}"
        self._permissions: dict[str, str] = {}
        self._nodes: dict[str, str] = {}  # path -> node id: a node id never changes

    # -- issues, labels, comments --------------------------------------------------------

    def open_issues(self, label: str) -> list[dict[str, Any]]:
        """Open issues (not pull requests) carrying ``label``: one conditional list call."""
        found = self.rest.get_all(f"{self.base}/issues", params={"labels": label, "state": "open"})
        return [issue for issue in found if "pull_request" not in issue]

    def repository_node(self) -> str:
        """The repository's GraphQL node id (one conditional read, once per client)."""
        if self.base not in self._nodes:
            self._nodes[self.base] = str(self.rest.get(self.base)["node_id"])
        return self._nodes[self.base]

    def label_node(self, name: str, *, color: str = "ededed") -> str:
        """The node id of the repository's label ``name`` (one conditional read, once per
        client), made once when the repository has none: GitHub's REST API makes an
        issue's new label on the fly, its GraphQL mutations name labels by id."""
        path = f"{self.base}/labels/{quote(name, safe='')}"
        if path not in self._nodes:
            try:
                found = self.rest.get(path)
            except GitHubNotFound:
                try:
                    found = self.rest.post(
                        f"{self.base}/labels", {"name": name, "color": color}, replayable=True
                    )
                except GitHubRefused:  # made meanwhile (422 already_exists): read it
                    found = self.rest.get(path)
            self._nodes[path] = str(found["node_id"])
        return self._nodes[path]

    def issue(self, number: int) -> dict[str, Any]:
        """Issue ``number`` (one conditional read)."""
        found: dict[str, Any] = self.rest.get(f"{self.base}/issues/{int(number)}")
        return found

    def create_comment(self, number: int, body: str) -> dict[str, Any]:
        """Comment on issue ``number``. After an answer that does not say whether it was made
        (a 502 after GitHub created it), the issue's comments are re-read and a comment with
        the same marker (first line, ``<!-- assay:... -->``) by a writer is taken as made."""
        made: dict[str, Any] = self.rest.post(
            f"{self.base}/issues/{number}/comments",
            {"body": body},
            reconcile=lambda: self.find_comment(number, body),
        )
        return made

    def find_comment(self, number: int, body: str) -> dict[str, Any] | None:
        """The newest comment on ``number`` carrying ``body``'s marker line (its whole text
        when it has none), written by a bot or a user with write permission."""
        first = body.split("\n", 1)[0]
        marked = first.startswith("<!-- assay:") and first.endswith("-->")
        for comment in reversed(self.issue_comments(number)):
            text = str(comment.get("body") or "").replace("\r\n", "\n")
            if (text.split("\n", 1)[0] == first) if marked else (text == body):
                user = comment.get("user") or {}
                if user.get("type") == "Bot" or self.can_write(str(user.get("login", ""))):
                    return dict(comment)
        return None

    def issue_comments(self, number: int) -> list[dict[str, Any]]:
        """Issue ``number``'s comments, oldest first (conditional pages)."""
        return self.rest.get_all(f"{self.base}/issues/{int(number)}/comments")

    def update_comment(self, comment_id: int, body: str) -> None:
        self.rest.patch(f"{self.base}/issues/comments/{comment_id}", {"body": body})

    def comments_since(self, since: str | None, *, limit: int = 1000) -> list[dict[str, Any]]:
        """The repository's comments (issues and pull requests) updated at or after ``since``
        (every comment when None), oldest update first, up to about ``limit``.

        One conditional call per page covers every brief; the URL only changes when the
        cursor moves, so a poll that finds nothing new is a free 304.
        """
        params: dict[str, Any] = {"sort": "updated", "direction": "asc"}
        if since:
            params["since"] = since
        return self.rest.get_all(f"{self.base}/issues/comments", params=params, limit=limit)

    def timeline(self, number: int) -> list[dict[str, Any]]:
        """Issue ``number``'s timeline, oldest first (its ``labeled`` events name who)."""
        return self.rest.get_all(f"{self.base}/issues/{int(number)}/timeline")

    def reviews(self, pull: int) -> list[dict[str, Any]]:
        return self.rest.get_all(f"{self.base}/pulls/{pull}/reviews")

    def permission(self, login: str) -> str:
        """``admin``, ``maintain``, ``write``, ``triage``, ``read`` or ``none``, from the API."""
        if login not in self._permissions:
            found = self.rest.get(f"{self.base}/collaborators/{quote(login, safe='')}/permission")
            # ``permission`` folds maintain into write and triage into read, which is
            # exactly the line Assay draws.
            self._permissions[login] = str(found.get("permission") or "none")
        return self._permissions[login]

    def can_write(self, login: str) -> bool:
        return self.permission(login) in WRITE_PERMISSIONS

    # -- pull requests ---------------------------------------------------------------------

    def find_pull(self, head: str) -> dict[str, Any] | None:
        """The open pull request from branch ``head``, if any."""
        found = self.rest.get(
            f"{self.base}/pulls", params={"head": f"{self.owner}:{head}", "state": "open"}
        )
        return found[0] if found else None

    def open_pulls(self) -> list[dict[str, Any]]:
        """Every open pull request of the repository (conditional pages)."""
        return self.rest.get_all(f"{self.base}/pulls", params={"state": "open"})

    def merge_pull(self, number: int, *, sha: str, method: str = "merge") -> str:
        done = self.rest.put(
            f"{self.base}/pulls/{number}/merge", {"sha": sha, "merge_method": method}
        )
        return str(done["sha"])

    def batch(self, mutations: list[Mutation]) -> list[dict[str, Any] | None]:
        """Run mutations in one GraphQL request, in order (GitHub runs them serially), and
        return each one's answer. One GitHub refused is ``BatchRefused`` carrying the
        others' answers (they ran). A batch that makes something (``Mutation.creates``) is
        sent once: an answer that does not say whether GitHub ran it is ``WriteUncertain``,
        for the caller to reconcile (``assay.github.mirror``); one that only sets states
        (a body, ready, merged at one head, a label) is sent again after a 5xx."""
        if not mutations:
            return []
        declared, fields, variables = [], [], {}
        for index, mutation in enumerate(mutations):
            name = f"m{index}"
            declared.append(f"${name}: {_MUTATION_INPUTS[mutation.name]}!")
            selection = _MADE.get(mutation.name, "clientMutationId")
            fields.append(f"  {name}: {mutation.name}(input: ${name}) {{ {selection} }}")
            variables[name] = mutation.input
        query = "mutation Assay(" + ", ".join(declared) + ") {\n" + "\n".join(fields) + "\n}"
        replayable = not any(mutation.creates for mutation in mutations)
        data, errors = self.rest.graphql(query, variables, replayable=replayable)
        done = [data.get(f"m{index}") for index in range(len(mutations))]
        if errors:
            raise BatchRefused(f"GitHub GraphQL refused the request: {errors}", done=done)
        return done

    # -- checks and workflows ----------------------------------------------------------------

    def create_check_run(
        self,
        *,
        name: str,
        head_sha: str,
        conclusion: str | None,
        title: str,
        summary: str,
        text: str,
        external_id: str = "",
    ) -> int:
        def made_already() -> dict[str, Any] | None:
            for run in self.check_runs(head_sha, name=name):
                output = run.get("output") or {}
                if (run.get("external_id"), run.get("conclusion"), output.get("title")) == (
                    external_id,
                    conclusion,
                    title,
                ):
                    return run
            return None

        # Without a conclusion the run is created in progress, to be completed with
        # ``update_check_run`` (the gate signs over the run's id, known only then).
        state: dict[str, Any] = (
            {"status": "completed", "conclusion": conclusion}
            if conclusion is not None
            else {"status": "in_progress"}
        )
        made = self.rest.post(
            f"{self.base}/check-runs",
            {
                "name": name,
                "head_sha": head_sha,
                **state,
                "external_id": external_id,
                "output": {"title": title, "summary": summary[:65535], "text": text[:65535]},
            },
            reconcile=made_already,
        )
        return int(made["id"])

    def update_check_run(self, check_run_id: int, fields: dict[str, Any]) -> None:
        """PATCH a check run (GitHub lets only the app that made it do so)."""
        self.rest.patch(f"{self.base}/check-runs/{int(check_run_id)}", fields)

    def check_runs(self, head_sha: str, *, name: str | None = None) -> list[dict[str, Any]]:
        """Every check run on commit ``head_sha`` (``name``: only those named so, as the
        caller filters them: a run's name is not fixed, its app may rename it).

        ``filter=all`` on every page: GitHub's default, ``latest``, lists one run per name,
        the one completed last, and a job of the same app can set ``completed_at``, so the
        default could hide a newer red run behind an older green one."""
        found: list[dict[str, Any]] = []
        page = 1
        while True:
            body = self.rest.get(
                f"{self.base}/commits/{quote(head_sha, safe='')}/check-runs",
                params={"filter": "all", "per_page": 100, "page": page},
            )
            runs = body.get("check_runs", []) if isinstance(body, dict) else []
            found.extend(run for run in runs if isinstance(run, dict))
            total = body.get("total_count", 0) if isinstance(body, dict) else 0
            if len(runs) < 100 or page * 100 >= int(total):
                break
            page += 1
        return [run for run in found if name is None or run.get("name") == name]

    def workflow_run(self, run_id: int) -> dict[str, Any]:
        """One workflow run (its ``path`` names the workflow file it ran)."""
        found = self.rest.get(f"{self.base}/actions/runs/{int(run_id)}")
        return found if isinstance(found, dict) else {}

    def runs_in_progress(self) -> frozenset[int]:
        """The ids of the repository's workflow runs GitHub says are in progress: one
        conditional call (a quiet repository's second ask is a free 304), one more per 100
        runs past the first hundred."""
        found: set[int] = set()
        page = 1
        while True:
            body = self.rest.get(
                f"{self.base}/actions/runs",
                params={"status": "in_progress", "per_page": 100, "page": page},
            )
            runs = body.get("workflow_runs", []) if isinstance(body, dict) else []
            found.update(int(r["id"]) for r in runs if isinstance(r, dict) and "id" in r)
            total = body.get("total_count", 0) if isinstance(body, dict) else 0
            if len(runs) < 100 or page * 100 >= int(total) or page >= 10:
                return frozenset(found)
            page += 1

    def dispatch(self, workflow: str, *, ref: str = "main", inputs: dict[str, str]) -> None:
        """``workflow_dispatch``: the one way a GITHUB_TOKEN run can start another workflow.

        A dispatch leaves nothing to re-read, so after a 5xx it is ``WriteUncertain`` (exit
        69), never sent twice; the mirror records a dispatch only once it is answered, so the
        next sync sends it again if it was lost."""
        self.rest.post(
            f"{self.base}/actions/workflows/{quote(workflow, safe='')}/dispatches",
            {"ref": ref, "inputs": inputs},
        )
