"""``assay init`` into an empty repository, then a desk pass and the gate against the fake.

Everything runs as the real CLI in subprocesses, as the workflows run it: the starter set is
committed and pushed to the fake GitHub over smart HTTP, ``assay desk run example --once``
claims the example brief from main and works it with the scripted model, ``assay github
sync`` opens the draft pull request and marks it ready, ``assay verify`` re-runs the rows and
``assay github sync --only evidence`` publishes the check run. Each ``--json`` reports the
REST calls the command made.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import AssayRunner
from tests.github.fake_github import FakeGitHub

BRIEF = "example-add-function"


@pytest.mark.slow
def test_init_then_a_desk_pass_and_the_gate_on_github(
    fake_github: FakeGitHub, run_assay: AssayRunner, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    assert run_assay("init", str(repo)).returncode == 0
    git = [
        "git",
        "-C",
        str(repo),
        "-c",
        "user.name=someone",
        "-c",
        "user.email=someone@example.invalid",
        "-c",
        "http.extraHeader=Authorization: Bearer ghp-maintainer",
    ]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "assay init"], check=True)
    subprocess.run([*git, "push", "-q", fake_github.git_url, "main"], check=True)

    env = {
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
        "ASSAY_GITHUB_WRITE_SPACING": "0",
        "ASSAY_FORGE": "github:acme/widgets",
    }

    def assay(*args: str) -> Any:
        done = run_assay(*args, "--json", cwd=repo, env=env, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        return result

    ran = assay("desk", "run", "example", "--once", "--desks", "desks")
    assert [(r["brief"], r["review"]) for r in ran["runs"]] == [(BRIEF, "ready")]
    # Git only, but for the one conditional list of open `assay` issues (issue briefs).
    api = [c for c in fake_github.calls if not c.path.startswith("git:")]
    assert api and all(
        c.method == "GET" and c.path.split("?")[0].endswith("/repos/acme/widgets/issues")
        for c in api
    ), api

    mirrored = assay("github", "sync", "--dispatch-gate", "assay-gate.yml")
    # The run has finished: its pull request is opened ready for review, in one request.
    assert mirrored["actions"] == {BRIEF: ["pull+", "gate>"]}
    # The open issues listed (no issue names the brief), the repository's node id, the
    # request, the dispatch.
    assert (mirrored["rest"]["charged"], mirrored["rest"]["writes"]) == (4, 2)
    (pull,) = fake_github.pulls.values()
    assert pull["_head"] == f"assay/{BRIEF}" and pull["draft"] is False

    (gate,) = fake_github.dispatches
    assert gate["workflow"] == "assay-gate.yml" and gate["inputs"]["brief"] == BRIEF

    early = run_assay("github", "merge", BRIEF, cwd=repo, env=env)
    assert early.returncode == 1 and "merge refused" in early.stderr, early.stderr
    assert pull["merged"] is False

    # The gate job: a run of the gate workflow (GitHub sets GITHUB_RUN_ID in it).
    gate_run = fake_github.add_workflow_run(".github/workflows/assay-gate.yml")
    env["GITHUB_RUN_ID"] = str(gate_run)
    verified = assay("verify", gate["inputs"]["brief"], "--sha", gate["inputs"]["sha"])
    assert verified["passed"] is True and verified["published"] == ["check+"]

    # A look-alike: another workflow of the same app (every GITHUB_TOKEN is github-actions)
    # posts a green `assay/evidence` check on the head, newer than the gate's.
    evil_run = fake_github.add_workflow_run(".github/workflows/evil.yml", event="pull_request")
    posted = httpx.post(
        f"{fake_github.api_url}/repos/acme/widgets/check-runs",
        headers={"Authorization": "Bearer ghs-bot"},
        json={
            "name": "assay/evidence",
            "head_sha": verified["head_sha"],
            "status": "completed",
            "conclusion": "success",
            "external_id": f"{BRIEF}:{evil_run}",
        },
        timeout=30,
    )
    assert posted.status_code == 201, posted.text
    fooled = run_assay("github", "merge", BRIEF, cwd=repo, env=env)
    assert fooled.returncode == 1, fooled.stdout + fooled.stderr
    assert "carries no gate signature" in fooled.stderr
    assert pull["merged"] is False

    # The gate's publishing step sees its run is no longer the newest and publishes again:
    # the runs re-read, one made, one completed with the signature over its id.
    published = assay("github", "sync", "--only", "evidence")
    assert published["actions"] == {BRIEF: ["check+"]}
    assert published["rest"]["writes"] == 2
    *_, check = [
        c
        for c in sorted(fake_github.check_runs.values(), key=lambda c: c["id"])
        if c["external_id"] != posted.json()["external_id"]
    ]
    assert (check["name"], check["conclusion"]) == ("assay/evidence", "success")
    assert check["head_sha"] == verified["head_sha"]
    assert check["external_id"].startswith(f"{BRIEF}:{gate_run}:pass:")
    del env["GITHUB_RUN_ID"]

    quiet = assay("github", "sync", "--only", "evidence")
    assert quiet["actions"] == {BRIEF: []} and quiet["rest"]["writes"] == 0

    merged = assay("github", "merge", BRIEF)
    assert merged["head_sha"] == verified["head_sha"]
    assert "mergePullRequest" in merged["actions"] and pull["merged"] is True
    assert fake_github.ref("refs/heads/main") == pull["merge_commit_sha"]
    # One squash commit on main for the brief, with Assay's trailers; the run kept under its
    # run ref (journal included) and no .assay/ on main.
    bare = ["git", "--git-dir", str(fake_github.bare)]
    shown = subprocess.run(
        [*bare, "log", "-1", "--format=%P%n%B", "main"], capture_output=True, text=True, check=True
    ).stdout
    parents, message = shown.split("\n", 1)
    assert len(parents.split()) == 1
    assert f"Assay-Brief: {BRIEF}\nAssay-Head: {merged['head_sha']}\n" in message
    (run,) = [
        line.split(": ", 1)[1] for line in message.splitlines() if line.startswith("Assay-Run")
    ]
    assert fake_github.ref(run) is not None
    kept = [*bare, "ls-tree", "-r", "--name-only"]
    assert subprocess.run([*kept, run, f".assay/journal/{BRIEF}"], capture_output=True).stdout
    assert subprocess.run([*kept, "main", ".assay"], capture_output=True).stdout == b""

    # The token reached no commit, journal line or blob anywhere in the repository's history.
    every_object = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=fake_github.bare,
        capture_output=True,
        check=True,
    ).stdout
    assert b"journal" in every_object and b"ghs-bot" not in every_object
