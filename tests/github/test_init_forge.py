"""``assay init --forge``: the next step it prints is the one for the forge it was given, and
on an embedded forge those steps work as printed: a new user follows them to a gated brief
and a board, HTML page included."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from tests.conftest import AssayRunner


def test_on_an_embedded_forge_the_printed_next_steps_run_as_printed(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    env = {"ASSAY_STATE": str(tmp_path / "state")}
    assert run_assay("forge", "init", "forge.git", env=env).returncode == 0
    shown = run_assay("init", "work", "--forge", "forge.git", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "gh secret" not in shown.stdout and "gh api" not in shown.stdout
    assert "ASSAY_EVIDENCE_KEY" not in shown.stdout
    assert "next, on the embedded forge forge.git" in shown.stdout
    again = run_assay("init", "work", "--forge", "forge.git", "--json", env=env)
    report = json.loads(again.stdout)
    assert report["next"]["forge"] == "embedded" and "ruleset" not in report
    commands = report["next"]["commands"]
    assert commands and all(command in shown.stdout for command in commands)
    for command in commands:  # exactly as printed, from the same folder
        argv = shlex.split(command)
        assert argv[0] == "assay"
        done = run_assay(*argv[1:], env=env, timeout=240)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    status = json.loads(run_assay("status", "--forge", "forge.git", "--json", env=env).stdout)
    [row] = status["briefs"]
    assert row["state"] == "in review" and row["evidence"]["verified"] == 1
    # `assay board` wrote the HTML page its help promises, beside BOARD.md.
    assert "example-add-function" in (tmp_path / "BOARD.md").read_text(encoding="utf-8")
    page = (tmp_path / "board.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "example-add-function" in page


def test_a_forge_path_that_is_no_repository_is_refused_before_anything_is_written(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    done = run_assay("init", "work", "--forge", "nowhere.git", "--json")
    assert done.returncode == 65
    report = json.loads(done.stdout)
    assert "--forge nowhere.git" in report["message"] and "assay forge init" in report["message"]
    assert not (tmp_path / "work").exists()


def test_on_github_the_steps_name_the_repository(tmp_path: Path, run_assay: AssayRunner) -> None:
    done = run_assay("init", "work", "--forge", "github:acme/widgets", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["next"]["forge"] == "github" and report["secrets"] == ["ASSAY_EVIDENCE_KEY"]
    assert any(
        "gh secret set ASSAY_EVIDENCE_KEY --env assay-gate --repo acme/widgets" in c
        for c in report["next"]["commands"]
    )
    # The key lives in an environment only main deploys from, made before the secret is set.
    assert report["environment"] == {"name": "assay-gate", "deployment_branches": ["main"]}
    made, main_only, secret = report["next"]["commands"][:3]
    assert made == (
        "gh api -X PUT repos/acme/widgets/environments/assay-gate"
        " -F 'deployment_branch_policy[protected_branches]=false'"
        " -F 'deployment_branch_policy[custom_branch_policies]=true'"
    )
    assert main_only == (
        "gh api -X POST repos/acme/widgets/environments/assay-gate/deployment-branch-policies"
        " -f name=main -f type=branch"
    )
    assert "--env assay-gate" in secret
    shown = run_assay("init", "other", "--forge", "github:acme/widgets")
    assert "gh api -X POST repos/acme/widgets/rulesets" in shown.stdout
    assert "assay desk run" not in shown.stdout  # the workflows run the desks there
    plain = run_assay("init", "third")
    assert "repos/OWNER/REPO/rulesets" in plain.stdout and "--forge PATH" in plain.stdout


def test_board_writes_its_html_page_unless_told_not_to(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    assert run_assay("forge", "init", "forge.git").returncode == 0
    done = run_assay("board", "--forge", "forge.git", "--out", "out/BOARD.md", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["html"] == "out/board.html"
    assert (tmp_path / "out" / "board.html").read_text(encoding="utf-8").startswith("<!")
    only = run_assay("board", "--forge", "forge.git", "--out", "md/BOARD.md", "--no-html")
    assert only.returncode == 0, only.stderr
    assert sorted(p.name for p in (tmp_path / "md").iterdir()) == ["BOARD.md"]
    both = run_assay("board", "--forge", "forge.git", "--html", "x.html", "--no-html")
    assert both.returncode == 65 and "--no-html" in both.stderr
