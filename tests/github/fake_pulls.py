"""Pull requests, reviews, merges and the GraphQL mutations of the fake GitHub.

A mixin of ``FakeGitHub`` (it reads the fake's state: ``issues``, ``pulls``, ``reviews``,
``comments`` and the bare repository), split out to keep each module to one concept.
Merges are real: ``git merge-tree`` in the bare repository, refused for drafts and for a
head that moved since the caller looked. GraphQL requests are checked against the input
types of GitHub's schema for the four mutations Assay sends.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import jsonschema

from tests.github.fake_core import HttpError, Reply, now

_CLOSES = re.compile(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s+#(\d+)\b")
_TOKEN = re.compile(r"\s*(?:([A-Za-z_]\w*)|(\$)|([(){}:!,\[\]]))")
_NODE = {"type": "string", "minLength": 1}
_NODES = {"type": "array", "items": _NODE, "minItems": 1}


def _input(required: list[str], **props: Any) -> dict[str, Any]:
    """A GraphQL input object as JSON Schema: unknown fields are errors, as in GraphQL."""
    return {
        "type": "object",
        "required": required,
        "properties": {"clientMutationId": {"type": "string"}, **props},
        "additionalProperties": False,
    }


# The GraphQL mutations Assay sends, with the fields GitHub's schema gives their inputs.
GQL_INPUTS: dict[str, tuple[str, dict[str, Any]]] = {
    "markPullRequestReadyForReview": (
        "MarkPullRequestReadyForReviewInput",
        _input(["pullRequestId"], pullRequestId=_NODE),
    ),
    "updatePullRequest": (
        "UpdatePullRequestInput",
        _input(
            ["pullRequestId"],
            pullRequestId=_NODE,
            body={"type": "string"},
            title={"type": "string"},
            state={"enum": ["OPEN", "CLOSED"]},
            baseRefName={"type": "string"},
        ),
    ),
    "updateIssueComment": (
        "UpdateIssueCommentInput",
        _input(["id", "body"], id=_NODE, body={"type": "string"}),
    ),
    "addComment": (
        "AddCommentInput",
        _input(["subjectId", "body"], subjectId=_NODE, body={"type": "string"}),
    ),
    "addLabelsToLabelable": (
        "AddLabelsToLabelableInput",
        _input(["labelableId", "labelIds"], labelableId=_NODE, labelIds=_NODES),
    ),
    "removeLabelsFromLabelable": (
        "RemoveLabelsFromLabelableInput",
        _input(["labelableId", "labelIds"], labelableId=_NODE, labelIds=_NODES),
    ),
    "createPullRequest": (
        "CreatePullRequestInput",
        _input(
            ["repositoryId", "baseRefName", "headRefName", "title"],
            repositoryId=_NODE,
            baseRefName={"type": "string"},
            headRefName={"type": "string"},
            headRepositoryId=_NODE,
            title={"type": "string"},
            body={"type": "string"},
            draft={"type": "boolean"},
            maintainerCanModify={"type": "boolean"},
        ),
    ),
    "closeIssue": (
        "CloseIssueInput",
        _input(
            ["issueId"],
            issueId=_NODE,
            duplicateIssueId=_NODE,
            stateReason={"enum": ["COMPLETED", "NOT_PLANNED", "DUPLICATE", "REOPENED"]},
        ),
    ),
    "mergePullRequest": (
        "MergePullRequestInput",
        _input(
            ["pullRequestId"],
            pullRequestId=_NODE,
            expectedHeadOid={"type": "string", "pattern": "^[0-9a-f]{40}$"},
            mergeMethod={"enum": ["MERGE", "SQUASH", "REBASE"]},
            commitHeadline={"type": "string"},
            commitBody={"type": "string"},
            authorEmail={"type": "string"},
        ),
    ),
}
# What a mutation's payload may be asked for: the fields of GitHub's payload types (schema
# of @octokit/graphql-schema 15.26.1) that Assay reads. A selection of anything else is a
# violation: the fake would have to invent it.
_ID = {"clientMutationId": None}
GQL_PAYLOADS: dict[str, dict[str, Any]] = {
    **{name: _ID for name in GQL_INPUTS},
    "addComment": {**_ID, "commentEdge": {"node": {"id": None, "databaseId": None}}},
    "createPullRequest": {**_ID, "pullRequest": {"id": None, "number": None}},
}


class PullsMixin:
    """Route handlers for ``/pulls`` and ``/graphql`` (mixed into ``FakeGitHub``)."""

    def _pull_view(self, pull: dict[str, Any]) -> dict[str, Any]:
        view = self.contract.skeleton("pull-request")
        view.update({key: value for key, value in pull.items() if not key.startswith("_")})
        issue = self.issues[pull["number"]]
        view.update(
            title=issue["title"],
            body=issue["body"],
            state=issue["state"],
            labels=[self._label(name) for name in issue["_labels"]],
            closed_at=issue["closed_at"],
            updated_at=issue["updated_at"],
        )
        for side in ("head", "base"):
            branch = pull[f"_{side}"]
            end = self.contract.skeleton("pull-request")[side]
            end.update(
                ref=branch,
                label=f"{self.owner}:{branch}",
                sha=pull.get(f"_{side}_sha") or self.ref(f"refs/heads/{branch}") or "0" * 40,
                user=self._user(self.owner),
            )
            view[side] = end
        view["mergeable"] = not pull["merged"] and issue["state"] == "open"
        view["mergeable_state"] = "draft" if pull["draft"] else "clean"
        return view

    def _pull(self, n: str | int) -> dict[str, Any]:
        pull = self.pulls.get(int(n))
        if pull is None:
            raise HttpError(404, "Not Found")
        return pull

    def _pulls_list(self, *, query: dict[str, str], **_: Any) -> Reply:
        state = query.get("state", "open")
        head = query.get("head", "")
        found = []
        for number in sorted(self.pulls):
            pull = self.pulls[number]
            if state != "all" and self.issues[number]["state"] != state:
                continue
            if head and f"{self.owner}:{pull['_head']}" != head:
                continue
            view = self._pull_view(pull)
            simple = self.contract.skeleton("pull-request-simple")
            simple.update({key: view[key] for key in simple if key in view})
            simple["draft"] = view["draft"]
            found.append(simple)
        return self._page(found, query, f"/repos/{self.slug}/pulls")

    def _pulls_create(self, *, user: str, body: dict[str, Any], **_: Any) -> Reply:
        self._need_write(user)
        head, base = body["head"].split(":")[-1], body["base"]
        if self.ref(f"refs/heads/{head}") is None:
            raise HttpError(422, f"Validation Failed: head {head!r} does not exist")
        if self.ref(f"refs/heads/{base}") is None:
            raise HttpError(422, f"Validation Failed: base {base!r} does not exist")
        for pull in self.pulls.values():
            if pull["_head"] == head and self.issues[pull["number"]]["state"] == "open":
                raise HttpError(422, f"A pull request already exists for {self.owner}:{head}.")
        issue = self._new_issue(user, body["title"], body.get("body"), [])
        number = issue["number"]
        issue["pull_request"] = {
            "url": f"{self.api_url}/repos/{self.slug}/pulls/{number}",
            "html_url": f"https://github.invalid/{self.slug}/pull/{number}",
            "diff_url": f"https://github.invalid/{self.slug}/pull/{number}.diff",
            "patch_url": f"https://github.invalid/{self.slug}/pull/{number}.patch",
            "merged_at": None,
        }
        pull = {
            "id": issue["id"],
            "node_id": f"PR_{issue['id']}",
            "number": number,
            "draft": bool(body.get("draft", False)),
            "merged": False,
            "merged_at": None,
            "merge_commit_sha": None,
            "user": self._user(user),
            "url": issue["pull_request"]["url"],
            "html_url": issue["pull_request"]["html_url"],
            "created_at": issue["created_at"],
            "_head": head,
            "_base": base,
        }
        self.pulls[number] = pull
        self.reviews[number] = []
        return Reply(201, self._pull_view(pull))

    def _pulls_get(self, *, n: str, **_: Any) -> Reply:
        return Reply(200, self._pull_view(self._pull(n)))

    def _pulls_update(self, *, user: str, n: str, body: dict[str, Any], **_: Any) -> Reply:
        self._need_write(user)
        pull = self._pull(n)
        issue = self.issues[pull["number"]]
        for key in ("title", "body"):
            if key in body:
                issue[key] = body[key]
        if body.get("state") in ("open", "closed") and not pull["merged"]:
            issue["state"] = body["state"]
            issue["closed_at"] = now() if body["state"] == "closed" else None
        issue["updated_at"] = now()
        return Reply(200, self._pull_view(pull))

    def _pulls_merge(self, *, user: str, n: str, body: dict[str, Any] | None, **_: Any) -> Reply:
        self._need_write(user)
        body = body or {}
        commit = self._merge(
            self._pull(n),
            user=user,
            sha=body.get("sha"),
            method=body.get("merge_method", "merge"),
            title=body.get("commit_title"),
            text=body.get("commit_message"),
        )
        return Reply(
            200, {"sha": commit, "merged": True, "message": "Pull Request successfully merged"}
        )

    def _merge(
        self,
        pull: dict[str, Any],
        *,
        user: str,
        sha: str | None,
        method: str,
        title: str | None,
        text: str | None = None,
    ) -> str:
        """Merge in the bare repository, as GitHub does: refused for drafts and moved heads."""
        issue = self.issues[pull["number"]]
        if pull["merged"] or issue["state"] != "open":
            raise HttpError(405, "Pull Request is not mergeable")
        if pull["draft"]:
            raise HttpError(405, "Pull Request is still a draft")
        head = self.ref(f"refs/heads/{pull['_head']}")
        base = self.ref(f"refs/heads/{pull['_base']}")
        assert head and base
        if sha and sha != head:
            raise HttpError(409, "Head branch was modified. Review and try the merge again.")
        done = subprocess.run(
            ["git", "merge-tree", "--write-tree", base, head],
            cwd=self.bare,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise HttpError(405, "Pull Request is not mergeable")
        tree = done.stdout.split()[0]
        parents = ["-p", base] if method == "squash" else ["-p", base, "-p", head]
        message = title or f"Merge pull request #{pull['number']}"
        if text:  # GitHub's commit body (commitBody, commit_message) after the headline
            message += f"\n\n{text}"
        commit = self._git("commit-tree", tree, *parents, "-m", message)
        self.refuse_merge(f"refs/heads/{pull['_base']}", base=base, commit=commit, head=head)
        self._git("update-ref", f"refs/heads/{pull['_base']}", commit, base)
        pull.update(merged=True, merged_at=now(), merge_commit_sha=commit, _head_sha=head)
        pull["merged_by"] = self._user(user)
        issue.update(state="closed", closed_at=now())
        issue["pull_request"]["merged_at"] = pull["merged_at"]
        for closes in _CLOSES.findall(issue.get("body") or ""):
            if int(closes) in self.issues and int(closes) not in self.pulls:
                self.issues[int(closes)].update(state="closed", closed_at=now())
        return commit

    def _review_view(self, review: dict[str, Any]) -> dict[str, Any]:
        view = self.contract.skeleton("pull-request-review")
        view.update(review)
        return view

    def _reviews_list(self, *, n: str, query: dict[str, str], **_: Any) -> Reply:
        self._pull(n)
        found = [self._review_view(r) for r in self.reviews[int(n)]]
        return self._page(found, query, f"/repos/{self.slug}/pulls/{n}/reviews")

    def _reviews_create(self, *, user: str, n: str, body: dict[str, Any], **_: Any) -> Reply:
        pull = self._pull(n)
        event = body.get("event", "COMMENT")
        state = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}.get(
            event, "COMMENTED"
        )
        uid = self._next_id()
        review = {
            "id": uid,
            "node_id": f"PRR_{uid}",
            "user": self._user(user),
            "body": body.get("body", ""),
            "state": state,
            "commit_id": self.ref(f"refs/heads/{pull['_head']}"),
            "html_url": f"https://github.invalid/{self.slug}/pull/{n}#review-{uid}",
            "pull_request_url": pull["url"],
            "submitted_at": now(),
            "author_association": "OWNER" if user == self.owner else "NONE",
        }
        self.reviews[int(n)].append(review)
        self.issues[int(n)]["updated_at"] = review["submitted_at"]  # GitHub: the pull changed
        return Reply(200, self._review_view(review))

    def _graphql(self, request: dict[str, Any], user: str | None) -> Reply:
        """A batch of the mutations Assay sends, each checked against its input type and
        its selection against the payload fields modelled (``GQL_PAYLOADS``). GitHub runs
        the fields in order; one that fails is null with an error, the others still run."""
        if user is None:
            return HttpError(401, "Bad credentials").reply
        query, variables = request["query"], request.get("variables") or {}
        try:
            declared, fields = parse_mutation(query)
        except ValueError as exc:
            return self._graphql_violation(f"not a mutation batch ({exc}): {query!r}")
        data: dict[str, Any] = {}
        errors: list[dict[str, Any]] = []
        for alias, name, var, selection in fields:
            if name not in GQL_INPUTS:
                return self._graphql_violation(f"mutation {name} is not modelled")
            input_type, schema = GQL_INPUTS[name]
            if declared.get(var) != input_type + "!":
                return self._graphql_violation(f"${var} must be declared {input_type}!")
            if not _within(selection, GQL_PAYLOADS[name]):
                return self._graphql_violation(f"{name}: selection {selection!r} is not modelled")
            try:
                jsonschema.validate(variables.get(var), schema)
            except jsonschema.ValidationError as exc:
                return self._graphql_violation(f"{input_type}: {exc.message}")
            try:
                made = self._mutate(name, variables[var], user)
                data[alias] = _project({"clientMutationId": None, **made}, selection)
            except HttpError as exc:
                data[alias] = None
                errors.append({"message": exc.reply.body["message"], "path": [alias]})
        return Reply(200, {"data": data, **({"errors": errors} if errors else {})})

    def _graphql_violation(self, message: str) -> Reply:
        self.violations.append(f"graphql: {message}")
        return Reply(200, {"errors": [{"message": message}]})

    @staticmethod
    def _unresolved(node: str) -> HttpError:
        return HttpError(404, f"Could not resolve to a node with the global id of '{node}'")

    def _pull_by_node(self, node: str) -> dict[str, Any]:
        for pull in self.pulls.values():
            if pull["node_id"] == node:
                return pull
        raise self._unresolved(node)

    def _issue_by_node(self, node: str) -> dict[str, Any]:
        """The issue a node id names: an issue's, or a pull request's (its issue)."""
        for issue in self.issues.values():
            if issue["node_id"] == node:
                return issue
        return self.issues[self._pull_by_node(node)["number"]]

    def _label_by_node(self, node: str) -> str:
        for name, label in self.labels.items():
            if label["node_id"] == node:
                return name
        raise self._unresolved(node)

    def _mutate(self, name: str, data: dict[str, Any], user: str) -> dict[str, Any]:
        """Do one mutation; its payload (the fields ``GQL_PAYLOADS`` models)."""
        self._need_write(user)
        if name == "updateIssueComment":
            for comment in self.comments.values():
                if comment["node_id"] == data["id"]:
                    comment.update(body=data["body"], updated_at=now())
                    return {}
            raise self._unresolved(data["id"])
        if name == "addComment":
            issue = self._issue_by_node(data["subjectId"])
            comment = self.add_comment(issue["number"], data["body"], user)
            return {
                "commentEdge": {"node": {"id": comment["node_id"], "databaseId": comment["id"]}}
            }
        if name in ("addLabelsToLabelable", "removeLabelsFromLabelable"):
            self._need_triage(user)
            issue = self._issue_by_node(data["labelableId"])
            adding = name == "addLabelsToLabelable"
            for label in [self._label_by_node(node) for node in data["labelIds"]]:
                if adding and label not in issue["_labels"]:
                    issue["_labels"].append(label)
                    self._label_event(issue, "labeled", label, user)
                elif not adding and label in issue["_labels"]:
                    issue["_labels"].remove(label)
                    self._label_event(issue, "unlabeled", label, user)
            return {}
        if name == "closeIssue":
            issue = self._issue_by_node(data["issueId"])
            issue.update(state="closed", closed_at=now(), updated_at=now())
            return {}
        if name == "createPullRequest":
            if data["repositoryId"] != self.node_id:
                raise self._unresolved(data["repositoryId"])
            fields = {"title": data["title"], "body": data.get("body"), "draft": data.get("draft")}
            made = self._pulls_create(
                user=user, body={**fields, "head": data["headRefName"], "base": data["baseRefName"]}
            ).body
            return {"pullRequest": {"id": made["node_id"], "number": made["number"]}}
        pull = self._pull_by_node(data["pullRequestId"])
        issue = self.issues[pull["number"]]
        if name == "markPullRequestReadyForReview":
            pull["draft"] = False
        elif name == "updatePullRequest":
            for key in ("title", "body"):
                if key in data:
                    issue[key] = data[key]
            if data.get("state") in ("OPEN", "CLOSED") and not pull["merged"]:
                issue["state"] = str(data["state"]).lower()
                issue["closed_at"] = now() if data["state"] == "CLOSED" else None
            issue["updated_at"] = now()
        elif name == "mergePullRequest":
            self._merge(
                pull,
                user=user,
                sha=data.get("expectedHeadOid"),
                method=str(data.get("mergeMethod", "MERGE")).lower(),
                title=data.get("commitHeadline"),
                text=data.get("commitBody"),
            )
        return {}


Selection = dict[str, "Selection | None"]


def parse_mutation(text: str) -> tuple[dict[str, str], list[tuple[str, str, str, Selection]]]:
    """A mutation document of the shape Assay sends, parsed: its declared variables
    (``$m0: AddCommentInput!`` -> ``{"m0": "AddCommentInput!"}``) and its fields
    (``m0: addComment(input: $m0) { commentEdge { node { id } } }`` -> alias, name,
    variable, selection). Anything else is a ``ValueError``: the fake models these only."""
    tokens = _tokens(text)
    at = 0

    def take(expected: str | None = None) -> str:
        nonlocal at
        if at >= len(tokens) or (expected is not None and tokens[at] != expected):
            found = tokens[at] if at < len(tokens) else "the end"
            raise ValueError(f"expected {expected or 'a token'}, found {found!r}")
        at += 1
        return tokens[at - 1]

    def selection() -> Selection:
        take("{")
        picked: Selection = {}
        while tokens[at] != "}":
            name = take()
            picked[name] = selection() if at < len(tokens) and tokens[at] == "{" else None
        take("}")
        if not picked:
            raise ValueError("an empty selection")
        return picked

    take("mutation")
    if tokens[at] not in ("(", "{"):
        take()  # the operation's name
    declared: dict[str, str] = {}
    if tokens[at] == "(":
        take("(")
        while tokens[at] != ")":
            take("$")
            var = take()
            take(":")
            kind = take()
            declared[var] = kind + ("!" if tokens[at] == "!" and take("!") else "")
            if tokens[at] == ",":
                take(",")
        take(")")
    take("{")
    fields: list[tuple[str, str, str, Selection]] = []
    while tokens[at] != "}":
        alias = take()
        take(":")
        name = take()
        take("(")
        take("input")
        take(":")
        take("$")
        var = take()
        take(")")
        fields.append((alias, name, var, selection()))
    take("}")
    if at != len(tokens) or not fields:
        raise ValueError("not one mutation with fields")
    return declared, fields


def _tokens(text: str) -> list[str]:
    found: list[str] = []
    at = 0
    while text[at:].strip():
        match = _TOKEN.match(text, at)
        if match is None:
            raise ValueError(f"unexpected text at {text[at : at + 20]!r}")
        found.append(match.group(1) or match.group(2) or match.group(3))
        at = match.end()
    return found


def _within(selection: Selection, shape: dict[str, Any]) -> bool:
    """Whether ``selection`` asks only for fields of ``shape`` (leaves as leaves)."""
    for name, inner in selection.items():
        if name not in shape:
            return False
        below = shape[name]
        if (inner is None) != (below is None):
            return False
        if inner is not None and not _within(inner, below):
            return False
    return True


def _project(value: Any, selection: Selection | None) -> Any:
    """``value`` cut down to what ``selection`` asked for, as GraphQL answers."""
    if selection is None or value is None:
        return value
    return {name: _project(value.get(name), inner) for name, inner in selection.items()}
