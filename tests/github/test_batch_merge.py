"""Batched merges against the fake GitHub: one merge a window, however many briefs it carries.

GitHub recommends at most one merged pull request a minute per repository. A ``github:``
forge's gate keeps to it by default (``GitHubForge.merges_per_minute``: one, over the
budget's window, shortened here): a batch is one push to main that
carries every brief's squash commit, and the next batch waits for the window. The fleet is
made and verified on a local bare repository (``tests.evidence.batchkit``), then its refs
are fetched into the fake's repository, as if the desks had pushed them there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.claims import ClaimStore
from assay.evidence.batch import BatchOutcome, merge_batch
from assay.evidence.keys import gate_key
from assay.forge import open_forge
from assay.forge.budget import WINDOW_ENV
from assay.github.forge import MERGES_PER_MINUTE, GitHubForge
from assay.github.init import MAIN_RULESET
from assay.github.mirror import GitHubMirror
from tests.conftest import AssayRunner
from tests.evidence.batchkit import Fleet
from tests.evidence.gatekit import git
from tests.github.fake_github import BOT, TEST_WINDOW_S, FakeGitHub

# The gate's window here: longer than the fake's push window (TEST_WINDOW_S), so that the
# second batch, ready well within it, must wait for it.
WINDOW = 2.0
assert float(TEST_WINDOW_S) < WINDOW
BRIEFS = [f"g{n:02d}" for n in range(1, 11)]
# Logs every ref a push moved, with the time the push landed.
MOVES_HOOK = (
    '#!/bin/sh\nat=$(date +%s.%N)\nwhile read -r old new ref; do\n  echo "$at $old $new $ref"'
    ' >> "{log}"\ndone\n'
)


@pytest.fixture
def github_env(fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_API_URL", fake_github.api_url)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs-bot")
    monkeypatch.setenv("ASSAY_GITHUB_WRITE_SPACING", "0")
    monkeypatch.delenv("ASSAY_GITHUB_GIT_URL", raising=False)
    monkeypatch.delenv("ASSAY_GITHUB_TOKEN_ENV", raising=False)


def _main_moves(log: Path) -> list[tuple[float, str, str]]:
    moves = []
    for line in log.read_text().splitlines() if log.exists() else []:
        at, old, new, ref = line.split()
        if ref == "refs/heads/main":
            moves.append((float(at), old, new))
    return moves


@pytest.mark.slow
def test_ten_briefs_land_in_one_merge_and_the_next_batch_waits_for_the_window(
    fake_github: FakeGitHub, github_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = Fleet(tmp_path / "fleet", [*BRIEFS, "g11"])
    fleet.verify_all()
    git("--git-dir", str(fake_github.bare), "fetch", "--quiet", str(fleet.forge), "+refs/*:refs/*")
    log = tmp_path / "moves.log"
    hook = fake_github.bare / "hooks" / "post-receive"
    hook.write_text(MOVES_HOOK.format(log=log))
    hook.chmod(0o755)
    before = fake_github.ref("refs/heads/main")

    monkeypatch.setenv(WINDOW_ENV, str(WINDOW))  # the client's window; the fake's stays
    opened = open_forge("github:acme/widgets", cache_dir=tmp_path / "gate")
    assert isinstance(opened, GitHubForge)
    with opened as forge:
        assert forge.merges_per_minute() == MERGES_PER_MINUTE == 1
        first = merge_batch(forge, BRIEFS)
        second = merge_batch(forge, ["g11"])
        ledger = forge.merge_ledger
    assert [e.outcome for e in first.entries] == [BatchOutcome.SQUASHED] * 10
    assert [e.outcome for e in second.entries] == [BatchOutcome.SQUASHED]

    # Ten squash commits in one push to main, then one more in a second push a window on.
    moves = _main_moves(log)
    assert [(old, new) for _, old, new in moves] == [
        (before, first.main_after),
        (first.main_after, second.main_after),
    ]
    assert moves[1][0] - moves[0][0] >= WINDOW
    shas = git("--git-dir", str(fake_github.bare), "rev-list", f"{before}..main").split()
    assert len(shas) == 11
    subjects = git("--git-dir", str(fake_github.bare), "log", "--format=%s", f"{before}..main")
    assert subjects.splitlines() == [f"Add {name}" for name in reversed([*BRIEFS, "g11"])]
    # The client waited for the merge window; the fake never had to refuse a push.
    assert ledger is not None and ledger.stats.waits == 1 and ledger.stats.throttled == 0
    assert fake_github.throttled_pushes == []
    for name in [*BRIEFS, "g11"]:
        assert fake_github.ref(f"refs/assay/runs/{name}/1") == fleet.heads[name]


def _config(fake: FakeGitHub, record: dict[str, object]) -> None:
    """Write ``refs/assay/config`` in the fake's repository, as any job with contents:
    write could."""
    gd = ["--git-dir", str(fake.bare)]
    blob = git(*gd, "hash-object", "-w", "--stdin", input=json.dumps(record).encode())
    tree = git(*gd, "mktree", input=f"100644 blob {blob}\trecord.json\n".encode())
    old = fake.ref("refs/assay/config")
    commit = git(*gd, "commit-tree", tree, "-m", "config", *(["-p", old] if old else []))
    git(*gd, "update-ref", "refs/assay/config", commit)


def test_a_github_merge_budget_is_one_a_minute_unless_set_and_a_bad_record_keeps_it(
    fake_github: FakeGitHub, github_env: None, tmp_path: Path
) -> None:
    fake_github.seed_main({"README.md": "widgets\n"})
    for n, (record, expected) in enumerate(
        [
            ({}, 1),
            ({"v": 1, "kind": "forge-config", "merges_per_minute": 3}, 3),
            ({"v": 1, "kind": "forge-config", "merges_per_minute": "lots"}, 1),
        ]
    ):
        if record:
            _config(fake_github, record)
        opened = open_forge("github:acme/widgets", cache_dir=tmp_path / f"gate-{n}")
        with opened as forge:
            assert forge.merges_per_minute() == expected, record


def test_a_batch_on_github_closes_its_pull_requests_and_issues_naming_each_commit(
    fake_github: FakeGitHub, github_env: None, tmp_path: Path, run_assay: AssayRunner
) -> None:
    names = ["p1", "p2"]
    fleet = Fleet(tmp_path / "fleet", names)
    fleet.verify_all()
    git("--git-dir", str(fake_github.bare), "fetch", "--quiet", str(fleet.forge), "+refs/*:refs/*")
    issues = {name: int(fake_github._new_issue(BOT, name, "x", [])["number"]) for name in names}
    with open_forge("github:acme/widgets", cache_dir=tmp_path / "desk") as forge:
        assert isinstance(forge, GitHubForge)
        mirror = GitHubMirror(forge)
        claims = {record.brief: record for record in ClaimStore(forge).list()}
        for name in names:
            mirror.claim(name, claims[name], issue=issues[name])
            mirror.open_review(name, title=f"Add {name}", branch=f"assay/{name}", body="b")
            mirror.finish_review(name, body="b")
        pulls = {name: mirror.state(name).pull for name in names}
    graphql_before = sum(call.path.endswith("/graphql") for call in fake_github.calls)

    done = run_assay("merge", "--ready", "--forge", "github:acme/widgets", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    commits = {entry["brief"]: entry["commit"] for entry in report["briefs"]}
    assert report["github"] == {
        name: ["updatePullRequest", "updateIssueComment", "label-", "issue-"] for name in names
    }
    # One GraphQL request closed both pull requests and edited both claim comments.
    graphql = sum(call.path.endswith("/graphql") for call in fake_github.calls)
    assert graphql - graphql_before == 1
    for name in names:
        pull = pulls[name]
        assert pull is not None and fake_github.issues[pull]["state"] == "closed"
        issue = fake_github.issues[issues[name]]
        assert issue["state"] == "closed" and "assay:claimed" not in issue["_labels"]
        [comment] = [c for c in fake_github.comments.values() if c["_issue"] == issues[name]]
        assert f"Merged as {commits[name][:12]} in a batch." in comment["body"]
    with open_forge("github:acme/widgets", cache_dir=tmp_path / "reader") as forge:
        assert isinstance(forge, GitHubForge)
        states = GitHubMirror(forge).states()
    assert {name: states[name].pull_state for name in names} == dict.fromkeys(names, "merged")
    assert {name: states[name].merged_sha for name in names} == commits


def test_a_batch_lands_on_a_main_the_printed_ruleset_protects(
    fake_github: FakeGitHub, github_env: None, tmp_path: Path
) -> None:
    # The ruleset assay init prints judges a push to main by the pushed commit's own
    # assay/evidence check, and a batch's top is a commit nobody checked: the gate pushes it
    # to refs/assay/merging, publishes its check there, then moves main (and drops the ref).
    fleet = Fleet(tmp_path / "fleet", ["r1", "r2"])
    fleet.verify_all()
    git("--git-dir", str(fake_github.bare), "fetch", "--quiet", str(fleet.forge), "+refs/*:refs/*")
    fake_github.protect(MAIN_RULESET)
    before = fake_github.ref("refs/heads/main")
    with open_forge("github:acme/widgets", cache_dir=tmp_path / "gate") as forge:
        result = merge_batch(forge, ["r1", "r2"], key=gate_key())  # the key verify used
    assert [e.outcome for e in result.entries] == [BatchOutcome.SQUASHED] * 2
    top = fake_github.ref("refs/heads/main")
    assert top == result.main_after and top != before
    [check] = [r for r in fake_github.check_runs.values() if r["head_sha"] == top]
    assert (check["name"], check["conclusion"]) == ("assay/evidence", "success")
    assert check["app"]["slug"] == "github-actions" and ":pass:-:-:ed25519:" in check["external_id"]
    assert fake_github.ref("refs/assay/merging") is None
