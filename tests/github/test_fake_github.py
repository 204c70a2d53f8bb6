"""The fake GitHub behaves like GitHub where Assay depends on it, and enforces the contract."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.github.rest import RestClient
from tests.github.fake_github import BOT, FakeGitHub, Limits


def client(fake: FakeGitHub, token: str = "ghs-bot") -> httpx.Client:
    return httpx.Client(
        base_url=fake.api_url,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "User-Agent": "assay-tests",
        },
        timeout=10,
    )


def git(*args: str, cwd: Path, token: str | None = "ghs-bot") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1")
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t")
    env["GIT_COMMITTER_EMAIL"] = "t@x"
    config: list[str] = []
    if token:
        config = ["-c", f"http.extraHeader=Authorization: Bearer {token}"]
    return subprocess.run(
        ["git", *config, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def push_branch(fake: FakeGitHub, tmp_path: Path, branch: str, files: dict[str, str]) -> str:
    work = tmp_path / f"clone-{branch}"
    assert git("clone", "-q", fake.git_url, str(work), cwd=tmp_path).returncode == 0
    git("checkout", "-q", "-b", branch, cwd=work)
    for name, text in files.items():
        (work / name).write_text(text)
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", f"work on {branch}", cwd=work)
    done = git("push", "-q", "origin", branch, cwd=work)
    assert done.returncode == 0, done.stderr
    return git("rev-parse", "HEAD", cwd=work).stdout.strip()


def test_etag_304_is_free_and_rate_headers_count_down(fake_github: FakeGitHub) -> None:
    with client(fake_github) as gh:
        made = gh.post("/repos/acme/widgets/issues", json={"title": "t", "labels": ["assay"]})
        assert made.status_code == 201
        first = gh.get("/repos/acme/widgets/issues", params={"labels": "assay"})
        assert first.status_code == 200 and [i["title"] for i in first.json()] == ["t"]
        remaining = int(first.headers["x-ratelimit-remaining"])
        again = gh.get(
            "/repos/acme/widgets/issues",
            params={"labels": "assay"},
            headers={"If-None-Match": first.headers["etag"]},
        )
        assert again.status_code == 304 and again.content == b""
        assert int(again.headers["x-ratelimit-remaining"]) == remaining
        assert fake_github.charged(BOT) == 2
        gh.post("/repos/acme/widgets/issues/1/comments", json={"body": "hello"})
        changed = gh.get(
            "/repos/acme/widgets/issues/1/comments",
            headers={"If-None-Match": first.headers["etag"]},
        )
        assert changed.status_code == 200 and changed.json()[0]["body"] == "hello"


def test_a_request_outside_the_contract_is_refused_and_recorded(tmp_path: Path) -> None:
    with FakeGitHub(tmp_path / "gh") as fake, client(fake) as gh:
        gh.post("/repos/acme/widgets/issues", json={"title": "t"})
        bad = gh.post("/repos/acme/widgets/issues/1/comments", json={"text": "no body field"})
        assert bad.status_code == 599
        assert fake.violations and "body" in fake.violations[0]


def test_injected_limits_carry_githubs_headers(fake_github: FakeGitHub) -> None:
    fake_github.inject(429, retry_after=7)
    fake_github.inject(403, secondary=True, retry_after=3)
    fake_github.inject(403, reset_in=60)
    with client(fake_github) as gh:
        first = gh.get("/rate_limit")
        assert first.status_code == 429 and first.headers["retry-after"] == "7"
        second = gh.get("/rate_limit")
        assert second.status_code == 403 and "secondary rate limit" in second.json()["message"]
        third = gh.get("/rate_limit")
        assert third.status_code == 403 and third.headers["x-ratelimit-remaining"] == "0"
        assert gh.get("/rate_limit").status_code == 200


def test_primary_limit_runs_out(tmp_path: Path) -> None:
    with FakeGitHub(tmp_path / "gh", rate_limit=2) as fake, client(fake) as gh:
        assert gh.get("/rate_limit").status_code == 200
        assert gh.get("/rate_limit").status_code == 200
        over = gh.get("/rate_limit")
        assert over.status_code == 403 and over.headers["x-ratelimit-remaining"] == "0"
        assert not fake.violations


def test_auth_and_user_agent_are_required(fake_github: FakeGitHub) -> None:
    with httpx.Client(base_url=fake_github.api_url) as bare:
        assert bare.get("/rate_limit", headers={"User-Agent": "x"}).status_code == 401
    with client(fake_github, token="nope") as gh:
        assert gh.get("/rate_limit").status_code == 401


def test_git_smart_http_needs_a_token(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.seed_main({"README.md": "hi\n"})
    refused = git("ls-remote", fake_github.git_url, cwd=tmp_path, token=None)
    assert refused.returncode != 0
    listed = git("ls-remote", fake_github.git_url, cwd=tmp_path)
    assert listed.returncode == 0 and "refs/heads/main" in listed.stdout


def test_draft_pull_request_lifecycle_merges_in_git(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.seed_main({"README.md": "hi\n"})
    head = push_branch(fake_github, tmp_path, "assay/b1", {"a.txt": "a\n"})
    with client(fake_github) as gh:
        issue = gh.post("/repos/acme/widgets/issues", json={"title": "b1"}).json()
        pr = gh.post(
            "/repos/acme/widgets/pulls",
            json={
                "title": "b1",
                "head": "assay/b1",
                "base": "main",
                "draft": True,
                "body": f"Closes #{issue['number']}",
            },
        ).json()
        assert pr["draft"] is True and pr["head"]["sha"] == head
        assert gh.put(f"/repos/acme/widgets/pulls/{pr['number']}/merge").status_code == 405
        check = gh.post(
            "/repos/acme/widgets/check-runs",
            json={
                "name": "assay/evidence",
                "head_sha": head,
                "conclusion": "success",
                "output": {"title": "ok", "summary": "1/1"},
            },
        )
        assert check.status_code == 201 and check.json()["status"] == "completed"
        listed = gh.get(f"/repos/acme/widgets/commits/{head}/check-runs").json()
        assert listed["total_count"] == 1
        ready = httpx.post(
            fake_github.base + "/api/graphql",
            headers={"Authorization": "Bearer ghs-bot", "User-Agent": "t"},
            json={
                "query": "mutation A($m0: MarkPullRequestReadyForReviewInput!) {\n"
                "  m0: markPullRequestReadyForReview(input: $m0) { clientMutationId }\n}",
                "variables": {"m0": {"pullRequestId": pr["node_id"]}},
            },
        ).json()
        assert ready == {"data": {"m0": {"clientMutationId": None}}}
        assert gh.get(f"/repos/acme/widgets/pulls/{pr['number']}").json()["draft"] is False
        merged = gh.put(f"/repos/acme/widgets/pulls/{pr['number']}/merge", json={"sha": head})
        assert merged.status_code == 200 and merged.json()["merged"] is True
        assert fake_github.ref("refs/heads/main") == merged.json()["sha"]
        assert gh.get(f"/repos/acme/widgets/issues/{issue['number']}").json()["state"] == "closed"
        main_ref = gh.get("/repos/acme/widgets/git/ref/heads/main").json()
        assert main_ref["object"]["sha"] == merged.json()["sha"]


def test_write_permission_is_enforced_and_reported(fake_github: FakeGitHub) -> None:
    with client(fake_github, token="ghp-stranger") as stranger:
        made = stranger.post("/repos/acme/widgets/issues", json={"title": "from outside"})
        assert made.status_code == 201
        assert (
            stranger.post(
                "/repos/acme/widgets/issues/1/labels", json={"labels": ["assay"]}
            ).status_code
            == 403
        )
    with client(fake_github) as gh:
        perms: dict[str, Any] = {
            user: gh.get(f"/repos/acme/widgets/collaborators/{user}/permission").json()
            for user in ("maintainer", "stranger", "nobody")
        }
        assert perms["maintainer"]["permission"] == "admin"
        assert perms["stranger"]["permission"] == "read"
        assert perms["nobody"]["permission"] == "none" and perms["nobody"]["user"] is None


@pytest.mark.parametrize(
    ("inputs", "status"),
    [({"brief": "b1"}, 204), ({"unknown": "x"}, 422), ({}, 422)],
)
def test_workflow_dispatch_checks_the_workflow_on_the_ref(
    fake_github: FakeGitHub, inputs: dict[str, str], status: int
) -> None:
    workflow = (
        "on:\n  workflow_dispatch:\n    inputs:\n      brief:\n        required: true\njobs: {}\n"
    )
    fake_github.seed_main({".github/workflows/assay-desk.yml": workflow})
    with client(fake_github) as gh:
        done = gh.post(
            "/repos/acme/widgets/actions/workflows/assay-desk.yml/dispatches",
            json={"ref": "main", "inputs": inputs},
        )
        assert done.status_code == status
        missing = gh.post(
            "/repos/acme/widgets/actions/workflows/nope.yml/dispatches", json={"ref": "main"}
        )
        assert missing.status_code == 404
    assert len(fake_github.dispatches) == (1 if status == 204 else 0)


def test_pagination_follows_link_headers(fake_github: FakeGitHub) -> None:
    with client(fake_github) as gh:
        for n in range(5):
            gh.post("/repos/acme/widgets/issues", json={"title": f"t{n}"})
        first = gh.get("/repos/acme/widgets/issues", params={"per_page": 2})
        assert len(first.json()) == 2 and 'rel="next"' in first.headers["link"]
        last = gh.get("/repos/acme/widgets/issues", params={"per_page": 2, "page": 3})
        assert len(last.json()) == 1 and "link" not in last.headers


def test_graphql_outside_the_modelled_inputs_is_a_violation(tmp_path: Path) -> None:
    with FakeGitHub(tmp_path / "gh") as fake:
        answer = httpx.post(
            fake.base + "/api/graphql",
            headers={"Authorization": "Bearer ghs-bot", "User-Agent": "t"},
            json={
                "query": "mutation A($m0: UpdateIssueCommentInput!) {\n"
                "  m0: updateIssueComment(input: $m0) { clientMutationId }\n}",
                "variables": {"m0": {"id": "IC_1", "body": "b", "text": "wrong field"}},
            },
        ).json()
        assert answer["errors"] and "text" in fake.violations[0]


def graphql(fake: FakeGitHub, query: str, variables: dict[str, Any], token: str = "ghs-bot") -> Any:
    return httpx.post(
        fake.base + "/api/graphql",
        headers={"Authorization": f"Bearer {token}", "User-Agent": "t"},
        json={"query": query, "variables": variables},
    ).json()


def test_a_claim_and_its_pull_request_in_one_graphql_request(fake_github: FakeGitHub) -> None:
    """addLabelsToLabelable, addComment and createPullRequest as GitHub's schema has them:
    labels and the repository named by node id, the new objects' ids in the answer; labels
    by id only once the repository has them (REST makes them on the fly, GraphQL does not)."""
    fake_github.seed_main({"README.md": "x\n"})
    main = fake_github.ref("refs/heads/main")
    assert main is not None
    fake_github._git("update-ref", "refs/heads/assay/tidy", main)
    with client(fake_github) as gh:
        issue = gh.post("/repos/acme/widgets/issues", json={"title": "Tidy"}).json()
        assert gh.get("/repos/acme/widgets/labels/assay%3Aclaimed").status_code == 404
        label = gh.post("/repos/acme/widgets/labels", json={"name": "assay:claimed"})
        assert label.status_code == 201
        assert (
            gh.post("/repos/acme/widgets/labels", json={"name": "assay:claimed"}).status_code == 422
        )
        found = gh.get("/repos/acme/widgets/labels/assay%3Aclaimed").json()
        assert found["node_id"] == label.json()["node_id"]
        repository = gh.get("/repos/acme/widgets").json()["node_id"]
    query = (
        "mutation Assay($m0: AddLabelsToLabelableInput!, $m1: AddCommentInput!,"
        " $m2: CreatePullRequestInput!) {\n"
        "  m0: addLabelsToLabelable(input: $m0) { clientMutationId }\n"
        "  m1: addComment(input: $m1) { commentEdge { node { id databaseId } } }\n"
        "  m2: createPullRequest(input: $m2) { pullRequest { id number } }\n}"
    )
    variables = {
        "m0": {"labelableId": issue["node_id"], "labelIds": [found["node_id"]]},
        "m1": {"subjectId": issue["node_id"], "body": "claimed"},
        "m2": {
            "repositoryId": repository,
            "baseRefName": "main",
            "headRefName": "assay/tidy",
            "title": "Tidy",
            "body": "Closes #1",
            "draft": False,
        },
    }
    answer = graphql(fake_github, query, variables)
    comment = answer["data"]["m1"]["commentEdge"]["node"]
    pull = answer["data"]["m2"]["pullRequest"]
    assert fake_github.comments[comment["databaseId"]]["node_id"] == comment["id"]
    assert fake_github.pulls[pull["number"]]["node_id"] == pull["id"]
    assert fake_github.pulls[pull["number"]]["draft"] is False
    assert fake_github.issues[issue["number"]]["_labels"] == ["assay:claimed"]
    # A second pull request from the same head is refused, the other mutations still run.
    again = graphql(fake_github, query, variables)
    assert again["data"]["m2"] is None and "already exists" in again["errors"][0]["message"]
    assert again["data"]["m1"]["commentEdge"]["node"]["id"] != comment["id"]
    # A label nobody made cannot be named.
    unknown = graphql(
        fake_github,
        "mutation A($m0: RemoveLabelsFromLabelableInput!) {\n"
        "  m0: removeLabelsFromLabelable(input: $m0) { clientMutationId }\n}",
        {"m0": {"labelableId": issue["node_id"], "labelIds": ["LA_nope"]}},
    )
    assert unknown["data"]["m0"] is None and "LA_nope" in unknown["errors"][0]["message"]
    assert not fake_github.violations


def test_graphql_asking_for_what_the_fake_does_not_model_is_a_violation(tmp_path: Path) -> None:
    with FakeGitHub(tmp_path / "gh") as fake:
        answer = graphql(
            fake,
            "mutation A($m0: AddCommentInput!) {\n"
            "  m0: addComment(input: $m0) { commentEdge { node { id body } } }\n}",
            {"m0": {"subjectId": "I_1", "body": "b"}},
        )
        assert answer["errors"] and "selection" in fake.violations[0]


def test_issues_are_listed_newest_first(fake_github: FakeGitHub) -> None:
    with client(fake_github) as gh:
        for title in ("old", "new"):
            gh.post("/repos/acme/widgets/issues", json={"title": title})
        listed = gh.get("/repos/acme/widgets/issues").json()
        assert [i["title"] for i in listed] == ["new", "old"]
        oldest = gh.get("/repos/acme/widgets/issues", params={"direction": "asc"}).json()
        assert [i["title"] for i in oldest] == ["old", "new"]


def test_labels_from_a_user_without_triage_rights_are_dropped(fake_github: FakeGitHub) -> None:
    fake_github.tokens["ghp-triager"] = "triager"
    fake_github.permissions["triager"] = "triage"
    with client(fake_github, "ghp-stranger") as gh:
        made = gh.post("/repos/acme/widgets/issues", json={"title": "t", "labels": ["assay"]})
        assert made.status_code == 201 and made.json()["labels"] == []
        refused = gh.post("/repos/acme/widgets/issues/1/labels", json={"labels": ["assay"]})
        assert refused.status_code == 403
        edited = gh.patch("/repos/acme/widgets/issues/1", json={"labels": ["assay"]})
        assert edited.status_code == 200 and edited.json()["labels"] == []
    with client(fake_github, "ghp-triager") as gh:
        added = gh.post("/repos/acme/widgets/issues/1/labels", json={"labels": ["assay"]})
        assert added.status_code == 200 and [x["name"] for x in added.json()] == ["assay"]


def test_the_permission_endpoint_decodes_bot_logins(fake_github: FakeGitHub) -> None:
    with client(fake_github) as gh:
        found = gh.get("/repos/acme/widgets/collaborators/github-actions%5Bbot%5D/permission")
        assert found.status_code == 200 and found.json()["permission"] == "write"


def test_a_read_only_token_cannot_push(fake_github: FakeGitHub, tmp_path: Path) -> None:
    main = fake_github.seed_main({"README.md": "x\n"})
    work = tmp_path / "clone"
    assert git("clone", "-q", fake_github.git_url, str(work), cwd=tmp_path).returncode == 0
    (work / "evil.txt").write_text("evil\n")
    git("add", "evil.txt", cwd=work)
    git("commit", "-q", "-m", "evil", cwd=work)
    refused = git("push", "-q", "origin", "HEAD:main", cwd=work, token="ghp-stranger")
    assert refused.returncode != 0
    assert fake_github.ref("refs/heads/main") == main
    # Reading stays open to the same token, and a writer's push goes through.
    assert git("fetch", "-q", "origin", cwd=work, token="ghp-stranger").returncode == 0
    assert git("push", "-q", "origin", "HEAD:main", cwd=work).returncode == 0
    assert fake_github.ref("refs/heads/main") != main


class Clock:
    """The fake's clock, moved by the test (and by a client's sleep): no real waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_content_creating_requests_meet_the_secondary_limits(tmp_path: Path) -> None:
    clock = Clock()
    limits = Limits(creates_per_minute=3, creates_per_hour=5)
    with FakeGitHub(tmp_path / "gh", limits=limits, clock=clock) as fake, client(fake) as gh:
        made = [gh.post("/repos/acme/widgets/issues", json={"title": str(n)}) for n in range(3)]
        assert [r.status_code for r in made] == [201, 201, 201]
        over = gh.post("/repos/acme/widgets/issues", json={"title": "x"})
        assert over.status_code == 403 and "secondary rate limit" in over.json()["message"]
        assert 1 <= int(over.headers["retry-after"]) <= 61
        assert gh.get("/repos/acme/widgets/issues").status_code == 200  # reads are not limited
        clock.now += 61
        assert gh.post("/repos/acme/widgets/issues", json={"title": "3"}).status_code == 201
        assert gh.post("/repos/acme/widgets/issues", json={"title": "4"}).status_code == 201
        clock.now += 61
        hourly = gh.post("/repos/acme/widgets/issues", json={"title": "x"})
        assert hourly.status_code == 403 and int(hourly.headers["retry-after"]) > 60
        clock.now += 3600
        assert gh.post("/repos/acme/widgets/issues", json={"title": "5"}).status_code == 201
    assert not fake.violations


def test_pushes_over_the_budget_are_refused_until_the_window_passes(tmp_path: Path) -> None:
    clock = Clock()
    limits = Limits(pushes_per_minute=2)
    with FakeGitHub(tmp_path / "gh", limits=limits, clock=clock) as fake:
        fake.seed_main({"README.md": "x\n"})
        work = tmp_path / "clone"
        assert git("clone", "-q", fake.git_url, str(work), cwd=tmp_path).returncode == 0
        results = []
        for n in range(3):
            (work / "n.txt").write_text(f"{n}\n")
            git("add", "n.txt", cwd=work)
            git("commit", "-q", "-m", str(n), cwd=work)
            results.append(git("push", "-q", "origin", "HEAD:main", cwd=work).returncode)
        assert results[:2] == [0, 0] and results[2] != 0
        clock.now += 61
        assert git("push", "-q", "origin", "HEAD:main", cwd=work).returncode == 0
        assert fake._git("show", "refs/heads/main:n.txt") == "2"


def test_assay_waits_out_the_secondary_limit(tmp_path: Path) -> None:
    clock = Clock()
    limits = Limits(creates_per_minute=2)
    with FakeGitHub(tmp_path / "gh", limits=limits, clock=clock) as fake:
        rest = RestClient(fake.api_url, "ghs-bot", write_spacing_s=0.0, sleep=clock.sleep)
        with rest:
            for n in range(3):
                rest.post("/repos/acme/widgets/issues", {"title": str(n)})
        assert sorted(i["title"] for i in fake.issues.values()) == ["0", "1", "2"]
        assert rest.stats.retries == 1 and 1 <= rest.stats.waited_s <= 61
    assert not fake.violations
