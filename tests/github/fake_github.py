"""A stateful fake GitHub: REST API, one GraphQL mutation, and git over smart HTTP.

Real HTTP on 127.0.0.1 in a thread. State: issues, comments, labels, pull requests (draft and
ready-for-review), reviews, check runs, collaborator permissions, workflow dispatches; git refs
and merges live in a real bare repository that ``git http-backend`` serves at
``/<owner>/<repo>.git``. Behaviour that shapes Assay's design is modelled, not stubbed:
ETags with 304s that cost nothing, ``x-ratelimit-*`` headers and a primary limit, injectable
429s and 403 secondary limits with ``retry-after``, write permission, a required User-Agent.

Every request and every response goes through ``Contract`` (GitHub's OpenAPI description);
a violation is answered with HTTP 599 and kept in ``violations``, and the test fixture fails
the test on teardown, so a fake that drifts from GitHub cannot pass silently.

Pull requests, reviews, merges and GraphQL are in ``fake_pulls`` (a mixin); the HTTP
handler and shared reply types are in ``fake_core``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
import yaml

from assay.forge.budget import PushBudget, window_from_env
from assay.github.forge import PUSHES_PER_MINUTE
from tests.github.contract import Contract, ContractViolation, contract
from tests.github.fake_core import (
    API_PREFIX,
    HttpError,
    Reply,
    git_identity,
    now,
)
from tests.github.fake_core import Handler as Handler
from tests.github.fake_pulls import PullsMixin
from tests.github.fake_rules import GITHUB_ACTIONS_APP_ID, RulesMixin

BOT = "github-actions[bot]"
OTHER_APP = "other-app[bot]"  # another GitHub App installed on the repository
# The app a bot login acts for (``<slug>[bot]``): check runs belong to an app, and only
# that app may update them. Desk jobs and the gate both act as ``github-actions``.
APPS = {BOT: "github-actions", OTHER_APP: "other-app"}
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
_GRAPHQL_REQUEST = {
    "type": "object",
    "required": ["query"],
    "properties": {"query": {"type": "string"}, "variables": {"type": "object"}},
    "additionalProperties": False,
}
# Path parameters GitHub documents as one segment but accepts (and octokit sends) with
# slashes, e.g. ``git/ref/heads/main``; encoded only for matching against the description.
_SLASHED = re.compile(
    r"(?<=/git/ref/)(.+)|(?<=/git/matching-refs/)(.+)|(?<=/commits/)(.+)(?=/check-runs)"
)

PUSH_THROTTLED = "too many pushes to this repository"  # what a refused push's body starts with
# The budget's minute in the tests of tests/github (their conftest sets it): a lifecycle
# GitHub spreads over minutes runs in seconds, and still keeps to 6 pushes a window.
TEST_WINDOW_S = "0.5"


@dataclass
class Limits:
    """GitHub's published limits past the primary one, per minute and per hour.

    Content-creating requests (REST POSTs and GraphQL mutations) per user: 80 a minute and
    500 an hour, answered with a 403 secondary rate limit and ``retry-after``. Pushes per
    repository: 6 a minute, always (``pushes_per_minute=None`` lifts it, for a test about
    something else that must push more), counted when receive-pack is asked and refused
    over the budget with a 429, ``Retry-After`` and a body saying so (docs/github.md,
    "Forge budget", says why a refusal). The push budget's minute is
    ``ASSAY_FORGE_BUDGET_WINDOW_SECONDS`` (``assay.forge.budget``), the setting the client
    reads too, so a test that shortens it shortens both. Tests scale the numbers down and
    move ``FakeGitHub``'s clock instead of sleeping.
    """

    creates_per_minute: int = 80
    creates_per_hour: int = 500
    pushes_per_minute: int | None = PUSHES_PER_MINUTE
    push_window_s: float = field(default_factory=window_from_env)


@dataclass
class Fault:
    """One injected failure, answered instead of the next matching request."""

    status: int
    retry_after: int | None = None
    secondary: bool = False
    reset_in: int | None = None
    method: str | None = None
    path_contains: str = ""
    count: int = 1
    after: bool = False  # do the request, then answer the fault (a 502 after a create)


@dataclass
class Call:
    """One request the fake answered, for assertions on what a client did."""

    method: str
    path: str
    status: int
    user: str
    at: float


class FakeGitHub(PullsMixin, RulesMixin):
    """The fake; use as a context manager or call ``start()`` and ``close()``."""

    def __init__(
        self,
        root: Path,
        *,
        owner: str = "acme",
        repo: str = "widgets",
        tokens: dict[str, str] | None = None,
        permissions: dict[str, str] | None = None,
        rate_limit: int = 1000,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
        rulesets: list[dict[str, Any]] | None = None,
    ) -> None:
        self.root = root
        self.rulesets = list(rulesets or [])  # GitHub's rulesets API shape (fake_rules.py)
        self.owner, self.repo = owner, repo
        self.bare = root / owner / f"{repo}.git"
        self.bare.parent.mkdir(parents=True, exist_ok=True)
        self._git("init", "-q", "--bare", "-b", "main", str(self.bare), cwd=root)
        self._git("config", "http.receivepack", "true")
        self.tokens = tokens or {
            "ghs-bot": BOT,
            "ghp-maintainer": "maintainer",
            "ghp-stranger": "stranger",
            "ghs-other": OTHER_APP,
        }
        self.permissions = permissions or {
            BOT: "write",
            "maintainer": "admin",
            "stranger": "read",
            OTHER_APP: "write",
        }
        self.rate_limit = rate_limit
        self.limits = Limits() if limits is None else limits
        self.clock = clock
        self._creates: dict[str, list[float]] = {}  # user -> when each create was asked
        self._pushes: list[float] = []  # admitted pushes still inside the window
        self.pushes: list[float] = []  # every admitted push, on ``clock``: the fake's push log
        self.throttled_pushes: list[float] = []  # every push refused over the budget
        self.forced_throttles = 0  # the next pushes refused whatever the count (a test's)
        self.remaining: dict[str, int] = {}
        self.reset_at = int(time.time()) + 3600
        self.lock = threading.RLock()
        self.contract: Contract = contract()
        self.violations: list[str] = []
        self.calls: list[Call] = []
        self.faults: list[Fault] = []
        self.issues: dict[int, dict[str, Any]] = {}
        self.pulls: dict[int, dict[str, Any]] = {}
        self.comments: dict[int, dict[str, Any]] = {}
        self.reviews: dict[int, list[dict[str, Any]]] = {}
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.timeline: dict[int, list[dict[str, Any]]] = {}  # issue -> labeled/unlabeled events
        # The repository's labels by name: made by ``POST /labels``, or, as GitHub does, on
        # first use by an issue (created with it, or given it through the REST API).
        self.labels: dict[str, dict[str, Any]] = {}
        self.workflow_runs: dict[int, dict[str, Any]] = {}
        self.dispatches: list[dict[str, Any]] = []
        self._ids = 1000
        self._numbers = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._routes = self._route_table()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        fake = self

        class BoundHandler(Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), BoundHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        if self.rulesets:
            self.install_rules_hook(self.base)
        return self

    def protect(self, ruleset: dict[str, Any]) -> None:
        """Add a ruleset (``assay init``'s, say) to the running fake, as an admin would."""
        self.rulesets.append(ruleset)
        self.install_rules_hook(self.base)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base(self) -> str:
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        """What ``GITHUB_API_URL`` is on a GitHub Enterprise Server: ``https://HOST/api/v3``."""
        return self.base + API_PREFIX

    @property
    def git_url(self) -> str:
        return f"{self.base}/{self.owner}/{self.repo}.git"

    @property
    def slug(self) -> str:
        return f"{self.owner}/{self.repo}"

    # -- helpers for tests ---------------------------------------------------------------------

    def inject(self, status: int, **kwargs: Any) -> None:
        """Answer the next matching request(s) with a 429, a 403 or a 5xx (see ``Fault``)."""
        with self.lock:
            self.faults.append(Fault(status, **kwargs))

    def charged(self, user: str = BOT) -> int:
        """Requests that counted against ``user``'s primary rate limit."""
        return self.rate_limit - self.remaining.get(user, self.rate_limit)

    def ref(self, name: str) -> str | None:
        done = subprocess.run(
            ["git", "rev-parse", "-q", "--verify", name + "^{commit}"],
            cwd=self.bare,
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip() or None

    def seed_main(self, files: dict[str, str], *, message: str = "seed") -> str:
        """Commit ``files`` onto main of the bare repository (no REST call is made)."""
        parent = self.ref("refs/heads/main")
        env = git_identity()
        index = self.root / "seed.index"
        env["GIT_INDEX_FILE"] = str(index)
        if parent:
            self._git("read-tree", parent, env=env)
        else:
            self._git("read-tree", "--empty", env=env)
        for path, text in files.items():
            blob = self._git("hash-object", "-w", "--stdin", input=text, env=env)
            self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = self._git("write-tree", env=env)
        index.unlink(missing_ok=True)
        commit = self._git(
            "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=env
        )
        self._git("update-ref", "refs/heads/main", commit, parent or "")
        return commit

    def _git(
        self,
        *args: str,
        cwd: Path | None = None,
        input: str | None = None,
        env: dict[str, str] | None = None,
        check: bool = True,
    ) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd or self.bare,
            input=input,
            capture_output=True,
            text=True,
            env=env or git_identity(),
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout.strip()

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    # -- object builders (schema skeletons with the fields that matter filled in) --------------

    def _user(self, login: str) -> dict[str, Any]:
        user = self.contract.skeleton("simple-user")
        uid = int(hashlib.sha256(login.encode()).hexdigest()[:8], 16)
        user.update(
            login=login,
            id=uid,
            node_id=f"U_{uid}",
            type="Bot" if login.endswith("[bot]") else "User",
            html_url=f"https://github.invalid/{login}",
        )
        return user

    def _label(self, name: str) -> dict[str, Any]:
        """The label ``name`` (made on first use, as GitHub makes an issue's new label)."""
        if name not in self.labels:
            label = self.contract.skeleton("label")
            digest = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
            label.update(
                id=digest,
                node_id=f"LA_{digest}",
                name=name,
                color="ededed",
                url=f"{self.api_url}/repos/{self.slug}/labels/{name}",
            )
            self.labels[name] = label
        return dict(self.labels[name])

    @property
    def node_id(self) -> str:
        """The repository's GraphQL node id (what ``createPullRequest`` names it by)."""
        digest = int(hashlib.sha256(self.slug.encode()).hexdigest()[:8], 16)
        return f"R_{digest}"

    def _issue_view(self, issue: dict[str, Any]) -> dict[str, Any]:
        view = self.contract.skeleton("issue")
        view.update({key: value for key, value in issue.items() if not key.startswith("_")})
        view["labels"] = [self._label(name) for name in issue["_labels"]]
        view["comments"] = sum(1 for c in self.comments.values() if c["_issue"] == issue["number"])
        return view

    # -- routing -------------------------------------------------------------------------------

    def _route_table(self) -> list[tuple[str, re.Pattern[str], Callable[..., Reply]]]:
        repo = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table = [
            ("GET", r"/rate_limit", self._rate_limit_get),
            ("GET", repo, self._repo_get),
            ("GET", repo + r"/labels/(?P<name>[^/]+)", self._label_get),
            ("POST", repo + r"/labels", self._label_create),
            ("GET", repo + r"/issues", self._issues_list),
            ("POST", repo + r"/issues", self._issues_create),
            ("GET", repo + r"/issues/comments", self._comments_list_repo),
            ("PATCH", repo + r"/issues/comments/(?P<cid>\d+)", self._comments_update),
            ("GET", repo + r"/issues/(?P<n>\d+)", self._issues_get),
            ("PATCH", repo + r"/issues/(?P<n>\d+)", self._issues_update),
            ("GET", repo + r"/issues/(?P<n>\d+)/comments", self._comments_list),
            ("GET", repo + r"/issues/(?P<n>\d+)/timeline", self._timeline_list),
            ("POST", repo + r"/issues/(?P<n>\d+)/comments", self._comments_create),
            ("POST", repo + r"/issues/(?P<n>\d+)/labels", self._labels_add),
            ("DELETE", repo + r"/issues/(?P<n>\d+)/labels/(?P<name>[^/]+)", self._labels_remove),
            ("GET", repo + r"/pulls", self._pulls_list),
            ("POST", repo + r"/pulls", self._pulls_create),
            ("GET", repo + r"/pulls/(?P<n>\d+)", self._pulls_get),
            ("PATCH", repo + r"/pulls/(?P<n>\d+)", self._pulls_update),
            ("PUT", repo + r"/pulls/(?P<n>\d+)/merge", self._pulls_merge),
            ("GET", repo + r"/pulls/(?P<n>\d+)/reviews", self._reviews_list),
            ("POST", repo + r"/pulls/(?P<n>\d+)/reviews", self._reviews_create),
            ("GET", repo + r"/git/ref/(?P<ref>.+)", self._git_ref),
            ("GET", repo + r"/git/matching-refs/(?P<ref>.*)", self._git_matching_refs),
            ("POST", repo + r"/check-runs", self._checks_create),
            ("PATCH", repo + r"/check-runs/(?P<cid>\d+)", self._checks_update),
            ("GET", repo + r"/commits/(?P<ref>.+)/check-runs", self._checks_list),
            ("GET", repo + r"/actions/runs", self._workflow_runs_list),
            ("GET", repo + r"/actions/runs/(?P<rid>\d+)", self._workflow_run),
            ("GET", repo + r"/collaborators/(?P<username>[^/]+)/permission", self._permission),
            (
                "POST",
                repo + r"/actions/workflows/(?P<wf>[^/]+)/dispatches",
                self._dispatch,
            ),
        ]
        return [(method, re.compile(pattern + r"\Z"), fn) for method, pattern, fn in table]

    def handle_api(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        raw: bytes,
    ) -> tuple[int, dict[str, str], bytes]:
        """Answer one REST request; validate both directions against the contract."""
        with self.lock:
            user = self._auth(headers)
            documented = _SLASHED.sub(lambda m: m.group(0).replace("/", "%2F"), path)
            try:
                self.contract.check_request(
                    method, documented, query=query, headers=headers, body=raw
                )
            except ContractViolation as exc:
                return self._violation(str(exc))
            reply = self._dispatch_route(method, path, dict(query), raw, user, headers)
            status, out_headers, body = self._finish(method, path, reply, user, headers)
            try:
                self.contract.check_response(
                    method,
                    documented,
                    query=query,
                    headers=headers,
                    body=raw,
                    status=status,
                    response_headers=out_headers,
                    response_body=body,
                )
            except ContractViolation as exc:
                return self._violation(str(exc))
            self.calls.append(Call(method, path, status, user or "", time.monotonic()))
            return status, out_headers, body

    def handle_graphql(
        self, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            user = self._auth(headers)
            try:
                request = json.loads(raw)
                jsonschema.validate(request, _GRAPHQL_REQUEST)
            except (ValueError, jsonschema.ValidationError) as exc:
                return self._violation(f"graphql request: {exc}")
            fault, after = self._take_fault("POST", "/graphql")
            mutation = str(request.get("query", "")).lstrip().startswith("mutation")
            limited = None
            if user is not None and mutation and (fault is None or after):
                limited = self._secondary_limit(user)
            if fault is not None and not after:
                reply = fault
            elif limited is not None:
                reply = limited
            else:
                reply = self._graphql(request, user)
                reply = fault if fault is not None else reply
            status, out_headers, body = self._finish("POST", "/graphql", reply, user, headers)
            self.calls.append(Call("POST", "/graphql", status, user or "", time.monotonic()))
            return status, out_headers, body

    def _violation(self, message: str) -> tuple[int, dict[str, str], bytes]:
        self.violations.append(message)
        body = json.dumps({"message": f"contract violation: {message}"}).encode()
        return 599, {"Content-Type": "application/json"}, body

    def _auth(self, headers: dict[str, str]) -> str | None:
        value = headers.get("authorization", "")
        scheme, _, secret = value.partition(" ")
        if scheme.lower() in ("bearer", "token"):
            return self.tokens.get(secret)
        if scheme.lower() == "basic":
            _, _, password = base64.b64decode(secret).decode().partition(":")
            return self.tokens.get(password)
        return None

    def _dispatch_route(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        user: str | None,
        headers: dict[str, str],
    ) -> Reply:
        if not headers.get("user-agent"):
            # GitHub refuses requests without a User-Agent outright.
            return HttpError(403, "Request forbidden by administrative rules.").reply
        if user is None:
            return HttpError(401, "Bad credentials").reply
        fault, after = self._take_fault(method, path)
        if fault is not None and not after:
            return fault
        if method == "POST":
            limited = self._secondary_limit(user)
            if limited is not None:
                return limited
        if self.remaining.get(user, self.rate_limit) <= 0:
            return HttpError(
                403,
                "API rate limit exceeded",
                **{"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(self.reset_at)},
            ).reply
        for verb, pattern, fn in self._routes:
            match = pattern.match(path)
            if match and verb == method:
                args = match.groupdict()
                if "owner" in args and (args["owner"], args["repo"]) != (self.owner, self.repo):
                    return HttpError(404, "Not Found").reply
                body = json.loads(raw) if raw else None
                try:
                    done: Reply = fn(user=user, query=query, body=body, **args)
                except HttpError as exc:
                    return exc.reply
                except Exception as exc:  # a bug in the fake must fail the test, loudly
                    self.violations.append(f"fake crashed on {method} {path}: {exc!r}")
                    return HttpError(500, f"fake crashed: {exc!r}").reply
                return done if fault is None else fault
        return HttpError(404, "Not Found").reply

    def _secondary_limit(self, user: str) -> Reply | None:
        """Count one content-creating request; a 403 secondary limit when over either bound."""
        at = self.clock()
        seen = [t for t in self._creates.get(user, []) if at - t < 3600]
        minute = [t for t in seen if at - t < 60]
        if len(minute) >= self.limits.creates_per_minute:
            wait = 60 - (at - minute[0])
        elif len(seen) >= self.limits.creates_per_hour:
            wait = 3600 - (at - seen[0])
        else:
            self._creates[user] = [*seen, at]
            return None
        self._creates[user] = seen
        return HttpError(
            403, SECONDARY_MESSAGE, **{"retry-after": str(max(1, int(wait) + 1))}
        ).reply

    def _take_fault(self, method: str, path: str) -> tuple[Reply | None, bool]:
        for fault in self.faults:
            if fault.method not in (None, method) or fault.path_contains not in path:
                continue
            fault.count -= 1
            if fault.count <= 0:
                self.faults.remove(fault)
            headers: dict[str, str] = {}
            if fault.retry_after is not None:
                headers["retry-after"] = str(fault.retry_after)
            if fault.reset_in is not None:
                headers["x-ratelimit-remaining"] = "0"
                headers["x-ratelimit-reset"] = str(int(time.time()) + fault.reset_in)
            if fault.status >= 500:
                message = "Server Error"
            elif fault.secondary:
                message = SECONDARY_MESSAGE
            else:
                message = "API rate limit exceeded"
            return HttpError(fault.status, message, **headers).reply, fault.after
        return None, False

    def _finish(
        self, method: str, path: str, reply: Reply, user: str | None, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        body = b"" if reply.body is None else json.dumps(reply.body).encode()
        out = {"Content-Type": "application/json; charset=utf-8"} if body else {}
        status = reply.status
        if method == "GET" and status == 200:
            etag = 'W/"' + hashlib.sha256(body).hexdigest()[:40] + '"'
            out["ETag"] = etag
            if headers.get("if-none-match") == etag:
                status, body = 304, b""
                out.pop("Content-Type", None)
        if user is not None and status != 304 and "x-ratelimit-remaining" not in reply.headers:
            # A conditional request answered 304 does not count against the primary limit.
            self.remaining[user] = self.remaining.get(user, self.rate_limit) - 1
        remaining = self.remaining.get(user or "", self.rate_limit)
        out.update(
            {
                "x-ratelimit-limit": str(self.rate_limit),
                "x-ratelimit-remaining": str(max(remaining, 0)),
                "x-ratelimit-used": str(self.rate_limit - remaining),
                "x-ratelimit-reset": str(self.reset_at),
                "x-ratelimit-resource": "core",
            }
        )
        out.update(reply.headers)
        return status, out, body

    # -- REST handlers ---------------------------------------------------------------------------

    def _need_write(self, user: str) -> None:
        if self.permissions.get(user, "none") not in ("admin", "maintain", "write"):
            raise HttpError(403, "Resource not accessible by integration")

    def _can_triage(self, user: str) -> bool:
        return self.permissions.get(user, "none") in ("admin", "maintain", "write", "triage")

    def _need_triage(self, user: str) -> None:
        if not self._can_triage(user):
            raise HttpError(403, "Resource not accessible by integration")

    def _page(self, items: list[Any], query: dict[str, str], path: str) -> Reply:
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            rest = {**query, "page": str(page + 1), "per_page": str(per_page)}
            link = self.api_url + path + "?" + "&".join(f"{k}={v}" for k, v in rest.items())
            headers["Link"] = f'<{link}>; rel="next"'
        return Reply(200, chunk, headers)

    def _rate_limit_get(self, *, user: str, **_: Any) -> Reply:
        body = self.contract.skeleton("rate-limit-overview")
        remaining = self.remaining.get(user, self.rate_limit)
        core = {
            "limit": self.rate_limit,
            "remaining": remaining,
            "used": self.rate_limit - remaining,
            "reset": self.reset_at,
        }
        body["resources"]["core"] = core
        body["rate"] = core
        return Reply(200, body)

    def _repo_get(self, **_: Any) -> Reply:
        view = self.contract.skeleton("full-repository")
        digest = int(self.node_id[2:])
        owner = self._user(self.owner)
        view.update(
            id=digest,
            node_id=self.node_id,
            name=self.repo,
            full_name=self.slug,
            owner=owner,
            default_branch="main",
            url=f"{self.api_url}/repos/{self.slug}",
            html_url=f"https://github.invalid/{self.slug}",
        )
        return Reply(200, view)

    def _label_get(self, *, name: str, **_: Any) -> Reply:
        name = unquote(name)
        if name not in self.labels:
            raise HttpError(404, "Not Found")
        return Reply(200, self._label(name))

    def _label_create(self, *, user: str, body: dict[str, Any], **_: Any) -> Reply:
        self._need_write(user)
        name = str(body["name"])
        if name in self.labels:
            raise HttpError(422, "Validation Failed: label already_exists")
        label = self._label(name)
        if body.get("color"):
            self.labels[name]["color"] = label["color"] = str(body["color"])
        return Reply(201, label)

    def _issue(self, n: str | int) -> dict[str, Any]:
        issue = self.issues.get(int(n))
        if issue is None:
            raise HttpError(404, "Not Found")
        return issue

    def _issues_list(self, *, query: dict[str, str], **_: Any) -> Reply:
        state = query.get("state", "open")
        wanted = [name for name in query.get("labels", "").split(",") if name]
        # GitHub: sort=created, direction=desc by default, so the newest issue comes first.
        key = {"updated": "updated_at", "comments": "_comment_count"}.get(
            query.get("sort", "created"), "number"
        )
        newest_first = query.get("direction", "desc") == "desc"
        issues = sorted(
            self.issues.values(),
            key=lambda i: (self._sort_value(i, key), i["number"]),
            reverse=newest_first,
        )
        found = [
            self._issue_view(issue)
            for issue in issues
            if (state == "all" or issue["state"] == state)
            and all(name in issue["_labels"] for name in wanted)
        ]
        return self._page(found, query, f"/repos/{self.slug}/issues")

    def _sort_value(self, issue: dict[str, Any], key: str) -> Any:
        if key == "_comment_count":
            return sum(1 for c in self.comments.values() if c["_issue"] == issue["number"])
        return issue[key]

    def _issues_create(self, *, user: str, body: dict[str, Any], **_: Any) -> Reply:
        # GitHub silently drops labels (and assignees, milestones) asked for by a user
        # without triage rights: a stranger cannot label an issue `assay`.
        labels = body.get("labels", []) if self._can_triage(user) else []
        issue = self._new_issue(user, body["title"], body.get("body"), labels)
        return Reply(201, self._issue_view(issue))

    def _new_issue(
        self, user: str, title: str, text: str | None, labels: list[str]
    ) -> dict[str, Any]:
        self._numbers += 1
        number, uid = self._numbers, self._next_id()
        issue = {
            "id": uid,
            "node_id": f"I_{uid}",
            "number": number,
            "title": title,
            "body": text,
            "state": "open",
            "user": self._user(user),
            "url": f"{self.api_url}/repos/{self.slug}/issues/{number}",
            "html_url": f"https://github.invalid/{self.slug}/issues/{number}",
            "created_at": now(),
            "updated_at": now(),
            "closed_at": None,
            "_labels": list(dict.fromkeys(labels)),
        }
        self.issues[number] = issue
        for name in issue["_labels"]:
            self._label_event(issue, "labeled", name, user)
        return issue

    def _label_event(self, issue: dict[str, Any], event: str, name: str, user: str) -> None:
        """A ``labeled``/``unlabeled`` timeline event; GitHub bumps the issue's updated_at."""
        view = self.contract.skeleton("labeled-issue-event")
        uid, stamp = self._next_id(), now()  # one stamp: the second may turn between two
        view.update(
            id=uid,
            node_id=f"LE_{uid}",
            url=f"{self.api_url}/repos/{self.slug}/issues/events/{uid}",
            actor=self._user(user),
            event=event,
            created_at=stamp,
            label={"name": name, "color": "ededed"},
        )
        self.timeline.setdefault(issue["number"], []).append(view)
        issue["updated_at"] = stamp

    def _timeline_list(self, *, n: str, query: dict[str, str], **_: Any) -> Reply:
        """The issue's timeline, oldest first: its label events and its comments, each as
        it reads now (GitHub's also holds references and more, which Assay does not read).
        A comment made or edited changes the timeline, as on GitHub: a conditional read of
        it is charged again."""
        issue = self._issue(n)
        events = [
            self._comment_event(self.comments[item["_comment"]]) if "_comment" in item else item
            for item in self.timeline.get(issue["number"], [])
        ]
        return self._page(events, query, f"/repos/{self.slug}/issues/{n}/timeline")

    def _comment_event(self, comment: dict[str, Any]) -> dict[str, Any]:
        view = self.contract.skeleton("timeline-comment-event")
        view.update({key: value for key, value in comment.items() if not key.startswith("_")})
        view.update(event="commented", actor=comment["user"])
        return view

    def _issues_get(self, *, n: str, **_: Any) -> Reply:
        return Reply(200, self._issue_view(self._issue(n)))

    def _issues_update(self, *, user: str, n: str, body: dict[str, Any], **_: Any) -> Reply:
        issue = self._issue(n)
        if issue["user"]["login"] != user:
            self._need_write(user)
        for key in ("title", "body"):
            if key in body:
                issue[key] = body[key]
        if "labels" in body and self._can_triage(user):
            wanted = [str(x) for x in body["labels"]]
            for name in issue["_labels"]:
                if name not in wanted:
                    self._label_event(issue, "unlabeled", name, user)
            for name in wanted:
                if name not in issue["_labels"]:
                    self._label_event(issue, "labeled", name, user)
            issue["_labels"] = wanted
        if body.get("state") in ("open", "closed"):
            issue["state"] = body["state"]
            issue["closed_at"] = now() if body["state"] == "closed" else None
        issue["updated_at"] = now()
        return Reply(200, self._issue_view(issue))

    def _comment_view(self, comment: dict[str, Any]) -> dict[str, Any]:
        view = self.contract.skeleton("issue-comment")
        view.update({key: value for key, value in comment.items() if not key.startswith("_")})
        return view

    def _comments_list(self, *, n: str, query: dict[str, str], **_: Any) -> Reply:
        self._issue(n)
        found = [self._comment_view(c) for c in self.comments.values() if c["_issue"] == int(n)]
        return self._page(found, query, f"/repos/{self.slug}/issues/{n}/comments")

    def _comments_list_repo(self, *, query: dict[str, str], **_: Any) -> Reply:
        since = query.get("since", "")
        # GitHub sorts by ``sort`` (created by default), ties by id; ``since`` is inclusive.
        key = "updated_at" if query.get("sort") == "updated" else "created_at"
        found = [
            self._comment_view(c)
            for c in sorted(self.comments.values(), key=lambda c: (c[key], c["id"]))
            if c["updated_at"] >= since
        ]
        if query.get("direction") == "desc":
            found.reverse()
        return self._page(found, query, f"/repos/{self.slug}/issues/comments")

    def _comments_create(self, *, user: str, n: str, body: dict[str, Any], **_: Any) -> Reply:
        issue = self._issue(n)
        return Reply(201, self._comment_view(self.add_comment(issue["number"], body["body"], user)))

    def add_comment(self, number: int, text: str, user: str) -> dict[str, Any]:
        """Record a comment (used by the route, and by tests replaying a webhook's payload)."""
        uid = self._next_id()
        comment = {
            "id": uid,
            "node_id": f"IC_{uid}",
            "body": text,
            "user": self._user(user),
            "url": f"{self.api_url}/repos/{self.slug}/issues/comments/{uid}",
            "html_url": f"https://github.invalid/{self.slug}/issues/{number}#issuecomment-{uid}",
            "issue_url": f"{self.api_url}/repos/{self.slug}/issues/{number}",
            "created_at": now(),
            "updated_at": now(),
            "author_association": "OWNER" if user == self.owner else "NONE",
            "_issue": number,
        }
        self.comments[uid] = comment
        if number in self.issues:
            self.issues[number]["updated_at"] = comment["created_at"]  # as GitHub does
            self.timeline.setdefault(number, []).append({"_comment": uid})
        return comment

    def _comments_update(self, *, user: str, cid: str, body: dict[str, Any], **_: Any) -> Reply:
        comment = self.comments.get(int(cid))
        if comment is None:
            raise HttpError(404, "Not Found")
        if comment["user"]["login"] != user:
            self._need_write(user)
        comment["body"] = body["body"]
        comment["updated_at"] = now()
        return Reply(200, self._comment_view(comment))

    def _labels_add(self, *, user: str, n: str, body: dict[str, Any], **_: Any) -> Reply:
        self._need_triage(user)
        issue = self._issue(n)
        names = body.get("labels", []) if isinstance(body, dict) else body
        for name in names:
            if name not in issue["_labels"]:
                issue["_labels"].append(str(name))
                self._label_event(issue, "labeled", str(name), user)
        return Reply(200, [self._label(name) for name in issue["_labels"]])

    def _labels_remove(self, *, user: str, n: str, name: str, **_: Any) -> Reply:
        self._need_triage(user)
        issue = self._issue(n)
        name = unquote(name)
        if name not in issue["_labels"]:
            raise HttpError(404, "Label does not exist")
        issue["_labels"].remove(name)
        self._label_event(issue, "unlabeled", name, user)
        return Reply(200, [self._label(label) for label in issue["_labels"]])

    def _ref_view(self, ref: str, sha: str) -> dict[str, Any]:
        view = self.contract.skeleton("git-ref")
        view.update(
            ref=ref,
            node_id=f"REF_{sha[:12]}",
            url=f"{self.api_url}/repos/{self.slug}/git/{ref}",
            object={"type": "commit", "sha": sha, "url": "https://example.invalid/"},
        )
        return view

    def _all_refs(self) -> dict[str, str]:
        out = self._git("for-each-ref", "--format=%(refname) %(objectname)")
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    def _git_ref(self, *, ref: str, **_: Any) -> Reply:
        sha = self._all_refs().get(f"refs/{ref}")
        if sha is None:
            raise HttpError(404, "Not Found")
        return Reply(200, self._ref_view(f"refs/{ref}", sha))

    def _git_matching_refs(self, *, ref: str, **_: Any) -> Reply:
        found = [
            self._ref_view(name, sha)
            for name, sha in sorted(self._all_refs().items())
            if name.startswith(f"refs/{ref}")
        ]
        return Reply(200, found)

    def _check_view(self, run: dict[str, Any]) -> dict[str, Any]:
        view = self.contract.skeleton("check-run")
        view.update(run)
        return view

    def _app_view(self, user: str) -> dict[str, Any]:
        slug = APPS[user]
        app = self.contract.skeleton("nullable-integration")
        digest = int(hashlib.sha256(slug.encode()).hexdigest()[:6], 16)
        number = GITHUB_ACTIONS_APP_ID if slug == "github-actions" else digest
        app.update(id=number, slug=slug, node_id=f"A_{number}", name=slug)
        return app

    def _checks_create(self, *, user: str, body: dict[str, Any], **_: Any) -> Reply:
        self._need_write(user)
        if user not in APPS:  # a person's token (OAuth, PAT) cannot make check runs
            raise HttpError(403, "You must authenticate via a GitHub App.")
        sha = body["head_sha"]
        if self._git("cat-file", "-t", sha, check=False) != "commit":
            raise HttpError(422, f"No commit found for SHA: {sha}")
        uid = self._next_id()
        run = {
            "id": uid,
            "node_id": f"CR_{uid}",
            "name": body["name"],
            "head_sha": sha,
            "status": body.get("status", "queued"),
            "conclusion": body.get("conclusion"),
            "url": f"{self.api_url}/repos/{self.slug}/check-runs/{uid}",
            "external_id": body.get("external_id"),
            "started_at": body.get("started_at", now()),
            "completed_at": body.get("completed_at"),
            "output": _check_output(body.get("output")),
            "app": self._app_view(user),
        }
        if run["conclusion"] is not None:
            run["status"] = "completed"
            run["completed_at"] = run["completed_at"] or now()
        self.check_runs[uid] = run
        return Reply(201, self._check_view(run))

    def _checks_update(self, *, user: str, cid: str, body: dict[str, Any], **_: Any) -> Reply:
        self._need_write(user)
        run = self.check_runs.get(int(cid))
        if run is None:
            raise HttpError(404, "Not Found")
        if user not in APPS or run["app"]["slug"] != APPS[user]:
            raise HttpError(403, "Only the GitHub App that created a check run may update it.")
        for key in ("status", "conclusion", "completed_at", "external_id", "name"):
            if key in body:
                run[key] = body[key]
        if "output" in body:
            run["output"] = _check_output(body["output"])
        if run["conclusion"] is not None:
            run["status"] = "completed"
            run["completed_at"] = run["completed_at"] or now()
        return Reply(200, self._check_view(run))

    def add_workflow_run(
        self,
        path: str,
        *,
        head_sha: str = "",
        event: str = "workflow_dispatch",
        conclusion: str | None = "success",
    ) -> int:
        """A run of the workflow file ``path`` (what GitHub Actions would have started)."""
        uid = self._next_id()
        self.workflow_runs[uid] = {
            "id": uid,
            "node_id": f"WFR_{uid}",
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "head_sha": head_sha or "0" * 40,
            "head_branch": "main",
            "event": event,
            "status": "completed" if conclusion else "in_progress",
            "conclusion": conclusion,
            "run_number": len(self.workflow_runs) + 1,
            "workflow_id": 1,
            "url": f"{self.api_url}/repos/{self.slug}/actions/runs/{uid}",
            "html_url": f"https://github.com/{self.slug}/actions/runs/{uid}",
            "created_at": now(),
            "updated_at": now(),
        }
        return uid

    def finish_workflow_run(self, run_id: int, conclusion: str = "success") -> None:
        """The run ended (its job exited, or the runner was lost and GitHub gave up)."""
        with self.lock:
            run = self.workflow_runs[run_id]
            run.update(status="completed", conclusion=conclusion, updated_at=now())

    def _workflow_runs_list(self, *, query: dict[str, str], **_: Any) -> Reply:
        # GitHub: newest first; ``status`` is a status or a conclusion.
        wanted = query.get("status", "")
        found = []
        for run in sorted(self.workflow_runs.values(), key=lambda r: -r["id"]):
            if wanted and wanted not in (run["status"], run["conclusion"]):
                continue
            view = self.contract.skeleton("workflow-run")
            view.update(run)
            found.append(view)
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        chunk = found[(page - 1) * per_page : page * per_page]
        return Reply(200, {"total_count": len(found), "workflow_runs": chunk})

    def _workflow_run(self, *, rid: str, **_: Any) -> Reply:
        run = self.workflow_runs.get(int(rid))
        if run is None:
            raise HttpError(404, "Not Found")
        view = self.contract.skeleton("workflow-run")
        view.update(run)
        return Reply(200, view)

    def _checks_list(self, *, ref: str, query: dict[str, str], **_: Any) -> Reply:
        """GitHub's ``filter`` defaults to ``latest``: of each app's runs of one name, only
        the one completed last (by ``completed_at``, which the app may set; a run still in
        progress counts as the latest). ``filter=all`` lists every run. Newest first."""
        sha = self.ref(ref) or self.ref(f"refs/heads/{ref}") or ref
        runs = [
            run
            for run in sorted(self.check_runs.values(), key=lambda r: -r["id"])
            if run["head_sha"] == sha and query.get("check_name", run["name"]) == run["name"]
        ]
        if query.get("filter", "latest") == "latest":
            latest: dict[tuple[str, str], dict[str, Any]] = {}
            for run in runs:
                group = (run["app"]["slug"], run["name"])
                held = latest.get(group)
                if held is None or _completed(run) > _completed(held):
                    latest[group] = run
            runs = [run for run in runs if latest[(run["app"]["slug"], run["name"])] is run]
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        chunk = [self._check_view(run) for run in runs[(page - 1) * per_page : page * per_page]]
        return Reply(200, {"total_count": len(runs), "check_runs": chunk})

    def _permission(self, *, username: str, **_: Any) -> Reply:
        user = unquote(username)  # `github-actions%5Bbot%5D` is the login github-actions[bot]
        body = self.contract.skeleton("repository-collaborator-permission")
        permission = self.permissions.get(user, "none")
        body.update(permission=permission, role_name=permission)
        if permission != "none":
            collaborator = self.contract.skeleton("nullable-collaborator")
            collaborator.update(self._user(user))
            collaborator["permissions"] = {
                "pull": True,
                "push": permission in ("admin", "maintain", "write"),
                "admin": permission == "admin",
            }
            collaborator["role_name"] = permission
            body["user"] = collaborator
        return Reply(200, body)

    def _dispatch(self, *, user: str, wf: str, body: dict[str, Any], **_: Any) -> Reply:
        self._need_write(user)
        ref = body["ref"].removeprefix("refs/heads/")
        if self.ref(f"refs/heads/{ref}") is None:
            raise HttpError(422, f"No ref found for: {body['ref']}")
        text = self._git("show", f"refs/heads/{ref}:.github/workflows/{wf}", check=False)
        if not text:
            raise HttpError(404, "Not Found")
        workflow = yaml.safe_load(text)
        triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
        if not isinstance(triggers, dict) or "workflow_dispatch" not in triggers:
            raise HttpError(422, "Workflow does not have 'workflow_dispatch' trigger")
        declared = (triggers["workflow_dispatch"] or {}).get("inputs") or {}
        inputs = body.get("inputs") or {}
        unexpected = sorted(set(inputs) - set(declared))
        if unexpected:
            raise HttpError(422, f"Unexpected inputs provided: {unexpected}")
        missing = sorted(k for k, v in declared.items() if v.get("required") and k not in inputs)
        if missing:
            raise HttpError(422, f"Required input '{missing[0]}' not provided")
        self.dispatches.append({"workflow": wf, "ref": ref, "inputs": inputs, "user": user})
        return Reply(204)

    # -- git smart HTTP --------------------------------------------------------------------------

    def handle_git(
        self, method: str, path: str, query: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        user = self._auth(headers)
        if user is None:
            body = b"authentication required\n"
            return 401, {"WWW-Authenticate": 'Basic realm="GitHub"'}, body
        pushing = path.endswith("/git-receive-pack") or "service=git-receive-pack" in query
        if pushing and self.permissions.get(user, "none") not in ("admin", "maintain", "write"):
            with self.lock:
                self.calls.append(Call(method, "git:" + path, 403, user, time.monotonic()))
            message = f"Permission to {self.slug}.git denied to {user}.\n".encode()
            return 403, {"Content-Type": "text/plain"}, message
        if method == "POST" and path.endswith("/git-receive-pack"):
            refused = self._push_budget(user, path)
            if refused is not None:
                return refused
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": method,
            "REMOTE_USER": user,
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": headers.get("content-type", ""),
            "CONTENT_LENGTH": str(len(raw)),
        }
        if headers.get("content-encoding"):
            env["HTTP_CONTENT_ENCODING"] = headers["content-encoding"]
        if headers.get("git-protocol"):
            env["GIT_PROTOCOL"] = headers["git-protocol"]
        done = subprocess.run(
            ["git", "http-backend"], input=raw, env=env, capture_output=True, check=False
        )
        head, _, body = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, body = done.stdout.partition(b"\n\n")
        status, out = 200, {}
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                out[key.strip()] = value.strip()
        with self.lock:
            self.calls.append(Call(method, "git:" + path, status, user, time.monotonic()))
        return status, out, body

    def _push_budget(self, user: str, path: str) -> tuple[int, dict[str, str], bytes] | None:
        """Count one push against the repository's budget; the 429 that refuses it when the
        window already holds the budget's pushes (a refused push is not counted)."""
        with self.lock:
            at, limit = self.clock(), self.limits.pushes_per_minute
            window = self.limits.push_window_s
            self._pushes = [t for t in self._pushes if at - t < window]
            forced = self.forced_throttles > 0
            self.forced_throttles -= forced
            if forced or (limit is not None and len(self._pushes) >= limit):
                self.throttled_pushes.append(at)
                self.calls.append(Call("POST", "git:" + path, 429, user, time.monotonic()))
                oldest = self._pushes[0] if self._pushes else at
                wait = max(1, math.ceil(oldest + window - at))
                message = f"{PUSH_THROTTLED}: at most {limit} pushes in {window:g} s; "
                message += f"try again in {wait} s\n"
                headers = {"Content-Type": "text/plain", "Retry-After": str(wait)}
                return 429, headers, message.encode()
            self._pushes.append(at)
            self.pushes.append(at)
        return None

    def throttle_next_pushes(self, count: int) -> None:
        """Refuse the next ``count`` pushes as over the rate, whatever the window holds (as
        GitHub may, counting pushes Assay cannot see)."""
        with self.lock:
            self.forced_throttles += count

    def most_pushes_in_window(self) -> int:
        """The most admitted pushes any one budget window of the push log held."""
        with self.lock:
            return PushBudget(window=self.limits.push_window_s).count_in_window(self.pushes)


def _completed(run: dict[str, Any]) -> str:
    """A check run's ``completed_at`` for ordering: one still running sorts last."""
    return str(run.get("completed_at") or "~")


def _check_output(output: dict[str, Any] | None) -> dict[str, Any]:
    output = output or {}
    return {
        "title": output.get("title"),
        "summary": output.get("summary"),
        "text": output.get("text"),
        "annotations_count": len(output.get("annotations", [])),
        "annotations_url": "https://example.invalid/",
    }
