"""A hostile issue body is that brief's bad input, never every command's crash.

Anyone who may edit an issue writes YAML that Assay reads. Front matter nested a thousand
deep (2 KB) used to reach ``yaml.safe_load`` in the issue adapter and end every command that
lists issue briefs with a RecursionError (exit 70). It now goes through the one bounded
loader: ``--brief issue-N`` of that issue is exit 65 naming it, and every other brief keeps
working in ``github briefs``, ``status``, ``board``, ``sweep`` and ``verify``.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from assay.briefs.yamldoc import MAX_DEPTH, load_yaml
from assay.errors import BadInput
from assay.github.init import starter_files
from assay.github.issues import brief_from_issue
from tests.conftest import AssayRunner
from tests.github.fake_github import FakeGitHub

GOOD = '---\nid: tidy\nverify:\n  - id: unit\n    run: python -c "print(1)"\n---\nTidy up.\n'
DEEP = "---\nverify: " + "[" * 1000 + "]" * 1000 + "\n---\nx\n"


def post_issue(fake: FakeGitHub, title: str, body: str) -> int:
    with httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "person"},
        timeout=10,
    ) as gh:
        made = gh.post(
            f"/repos/{fake.slug}/issues", json={"title": title, "body": body, "labels": ["assay"]}
        )
        assert made.status_code == 201, made.text
        return int(made.json()["number"])


@pytest.mark.parametrize(
    "front",
    [
        "verify: " + "[" * 1000 + "]" * 1000,
        "verify: " + "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2),
        "a: &x [1]\nb: *x",
        "verify: '" + "x" * (300 * 1024) + "'",
    ],
    ids=["1000-deep", "just-too-deep", "alias", "too-large"],
)
def test_a_hostile_front_matter_is_bad_input_for_that_issue(front: str) -> None:
    issue = {"number": 7, "title": "t", "body": f"---\n{front}\n---\nx\n", "labels": []}
    with pytest.raises(BadInput) as caught:
        brief_from_issue(issue)
    assert caught.value.code == 65 and "issue #7" in caught.value.message


def test_nesting_within_the_bound_still_loads() -> None:
    text = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert load_yaml(text, source="x").data is not None


@pytest.mark.slow
def test_a_deep_issue_wedges_no_command(
    fake_github: FakeGitHub, run_assay: AssayRunner, tmp_path: Path
) -> None:
    files = {path: source.read_text() for path, source in starter_files().items()}
    fake_github.seed_main(files)
    for path, text in files.items():
        (tmp_path / "repo" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / path).write_text(text)
    good = post_issue(fake_github, "Tidy", GOOD)
    deep = post_issue(fake_github, "Deep", DEEP)
    env = {
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
        "ASSAY_GITHUB_WRITE_SPACING": "0",
        "ASSAY_FORGE": f"github:{fake_github.slug}",
    }
    accepted = run_assay("github", "events", "--json", env=env)  # the labels fix the texts
    assert set(json.loads(accepted.stdout)["accepted"]) == {str(good), str(deep)}, accepted.stderr
    listed = run_assay("github", "briefs", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert [(b["brief"], b["issue"]) for b in report["briefs"]] == [("tidy", good)]
    assert [e for e in report["errors"] if f"issue #{deep}" in e and "nest" in e]

    named = run_assay(
        "desk",
        "run",
        "example",
        "--brief",
        f"issue-{deep}",
        "--desks",
        str(tmp_path / "repo" / "desks"),
        env=env,
    )
    assert named.returncode == BadInput.code, named.stdout + named.stderr
    assert f"issue #{deep}" in named.stderr

    outputs = {}
    for command in (
        ("status", "--json"),
        ("board", "--out", str(tmp_path / "BOARD.md")),
        ("sweep", "--dry-run", "--json"),
    ):
        done = run_assay(*command, env=env)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        outputs[command[0]] = done.stdout
    assert "tidy" in json.dumps(json.loads(outputs["status"]))
    assert "tidy" in (tmp_path / "BOARD.md").read_text()
    # The gate reads the good brief's rows from its issue: not wedged by the other one
    # (tidy has no review yet, which is what it may say; it must not crash on issue #deep).
    verified = run_assay("verify", "tidy", "--json", env=env)
    assert verified.returncode != 70, verified.stdout + verified.stderr
    assert "RecursionError" not in verified.stderr and f"issue #{deep}" not in verified.stderr


def test_a_newer_issue_reusing_an_id_does_not_take_the_brief(
    fake_github: FakeGitHub, run_assay: AssayRunner, tmp_path: Path
) -> None:
    """GitHub lists the newest issue first: the first issue to name an id keeps it."""
    first = post_issue(fake_github, "Tidy", GOOD)
    second = post_issue(fake_github, "Tidy, but mine", GOOD.replace("print(1)", "print(2)"))
    env = {
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
    }
    spec = ["--forge", f"github:{fake_github.slug}"]
    assert run_assay("github", "events", *spec, env=env).returncode == 0  # fixes both texts
    done = run_assay("github", "briefs", "--json", *spec, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(b["brief"], b["issue"]) for b in report["briefs"]] == [("tidy", first)]
    assert [e for e in report["errors"] if f"issue #{second}" in e and f"issue #{first}" in e]
