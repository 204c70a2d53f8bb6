"""The REST client: conditional requests, limits waited out, serial spaced writes, errors."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from pathlib import Path

import pytest

from assay.errors import ForgeUnavailable
from assay.github.rest import (
    GitHubDenied,
    GitHubNotFound,
    GitHubRefused,
    RestClient,
    graphql_url,
    process_stats,
)
from tests.github.fake_github import BOT, FakeGitHub

ISSUES = "/repos/acme/widgets/issues"


def make(fake: FakeGitHub, token: str = "ghs-bot", **kwargs: object) -> RestClient:
    kwargs.setdefault("write_spacing_s", 0.0)
    return RestClient(fake.api_url, token, **kwargs)  # type: ignore[arg-type]


def test_polls_are_conditional_and_a_304_is_free(fake_github: FakeGitHub) -> None:
    with make(fake_github) as gh:
        gh.post(ISSUES, {"title": "one", "labels": ["assay"]})
        first = gh.get(ISSUES, params={"labels": "assay"})
        charged = fake_github.charged(BOT)
        again = gh.get(ISSUES, params={"labels": "assay"})
        assert again == first and again[0]["title"] == "one"
        assert fake_github.charged(BOT) == charged
        assert gh.stats.not_modified == 1 and gh.stats.calls == 3 and gh.stats.charged == 2
        gh.post(ISSUES, {"title": "two", "labels": ["assay"]})
        assert [i["title"] for i in gh.get(ISSUES, params={"labels": "assay"})] == ["two", "one"]


def test_the_etag_cache_survives_the_process(fake_github: FakeGitHub, tmp_path: Path) -> None:
    cache = tmp_path / "etags.json"
    with make(fake_github, etag_cache=cache) as gh:
        gh.post(ISSUES, {"title": "one"})
        gh.get_all(ISSUES)
    with make(fake_github, etag_cache=cache) as gh:
        assert [i["title"] for i in gh.get_all(ISSUES)] == ["one"]
        assert gh.stats.to_json()["not_modified"] == 1 and gh.stats.charged == 0


def test_429_with_retry_after_is_waited_out(fake_github: FakeGitHub) -> None:
    fake_github.inject(429, retry_after=1, method="POST")
    with make(fake_github) as gh:
        started = time.monotonic()
        made = gh.post(ISSUES, {"title": "after a wait"})
        assert made["title"] == "after a wait"
        assert time.monotonic() - started >= 1.0
        assert gh.stats.retries == 1 and gh.stats.waited_s == 1.0
    assert len(fake_github.issues) == 1


def test_403_secondary_limit_is_waited_out(fake_github: FakeGitHub) -> None:
    fake_github.inject(403, secondary=True, retry_after=1, path_contains="/issues")
    with make(fake_github) as gh:
        started = time.monotonic()
        assert gh.get(ISSUES) == []
        assert time.monotonic() - started >= 1.0 and gh.stats.retries == 1


def test_primary_limit_reset_too_far_away_gives_up_at_once(fake_github: FakeGitHub) -> None:
    fake_github.inject(403, reset_in=3600)
    with make(fake_github, max_wait_s=5) as gh:
        started = time.monotonic()
        with pytest.raises(ForgeUnavailable, match="reset in"):
            gh.get(ISSUES)
        assert time.monotonic() - started < 5 and gh.stats.retries == 0


def test_primary_limit_reset_soon_is_waited_for(fake_github: FakeGitHub) -> None:
    fake_github.inject(403, reset_in=0)
    with make(fake_github) as gh:
        assert gh.get(ISSUES) == [] and gh.stats.retries == 1 and gh.stats.waited_s >= 1.0


def test_errors_map_onto_the_error_tree(fake_github: FakeGitHub) -> None:
    with make(fake_github, token="ghp-stranger") as stranger:
        stranger.post(ISSUES, {"title": "t"})
        with pytest.raises(GitHubDenied) as denied:
            stranger.post(f"{ISSUES}/1/labels", {"labels": ["assay"]})
        assert denied.value.code == 77 and denied.value.details["status"] == 403
    with make(fake_github) as gh:
        with pytest.raises(GitHubNotFound) as missing:
            gh.get(f"{ISSUES}/99")
        assert missing.value.code == 65
        with pytest.raises(GitHubRefused) as refused:
            gh.post("/repos/acme/widgets/pulls", {"title": "x", "head": "nope", "base": "main"})
        assert refused.value.code == 1
    with make(fake_github, token="wrong") as wrong, pytest.raises(GitHubDenied):
        wrong.get(ISSUES)


def test_unreachable_api_is_unavailable_after_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gh = RestClient(f"http://127.0.0.1:{port}/api/v3", "t", attempts=2, sleep=lambda s: None)
    with gh, pytest.raises(ForgeUnavailable, match="unreachable"):
        gh.get("/rate_limit")
    assert gh.stats.calls == 2


def test_writes_are_serial_and_spaced(fake_github: FakeGitHub) -> None:
    with make(fake_github, write_spacing_s=0.15) as gh:
        gh.post(ISSUES, {"title": "t"})
        threads = [
            threading.Thread(target=gh.post, args=(f"{ISSUES}/1/comments", {"body": str(n)}))
            for n in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    posts = [call.at for call in fake_github.calls if call.method == "POST"]
    assert len(posts) == 5
    gaps = [later - earlier for earlier, later in itertools.pairwise(posts)]
    assert min(gaps) >= 0.14, gaps


def test_pages_are_followed(fake_github: FakeGitHub) -> None:
    with make(fake_github) as gh:
        for n in range(3):
            gh.post(ISSUES, {"title": str(n)})
        found = gh.get_all(ISSUES, params={"per_page": 2})  # newest first, as on GitHub
        assert [i["title"] for i in found] == ["2", "1", "0"]


def test_process_stats_add_up_every_client(fake_github: FakeGitHub) -> None:
    before = process_stats().calls
    with make(fake_github) as one, make(fake_github) as two:
        one.get("/rate_limit")
        two.get("/rate_limit")
    assert process_stats().calls == before + 2


def test_graphql_url_follows_the_api_root() -> None:
    assert graphql_url("https://api.github.com") == "https://api.github.com/graphql"
    assert graphql_url("https://ghe.example/api/v3/") == "https://ghe.example/api/graphql"
