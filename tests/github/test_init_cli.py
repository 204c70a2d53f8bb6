"""``assay init --cli``: a desk running an agent CLI, and the desk workflow that installs it
and hands the model key to the gateway only."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from assay.desks import load_desks
from assay.github.init import CLI_DESKS
from tests.conftest import AssayRunner

WORKFLOW = Path(__file__).resolve().parents[2] / "assay" / "github" / "templates" / "workflows"


@pytest.mark.parametrize(
    ("profile", "key"),
    [
        ("claude-code", "ANTHROPIC_API_KEY"),
        ("codex", "OPENAI_API_KEY"),
        ("gemini-cli", "GEMINI_API_KEY"),
        ("qwen-code", "OPENAI_API_KEY"),
        ("opencode", "OPENAI_API_KEY"),
        ("aider", "OPENAI_API_KEY"),
        ("mini-swe-agent", "OPENAI_API_KEY"),
    ],
)
def test_init_with_a_cli_writes_a_cli_desk_that_loads(
    tmp_path: Path, run_assay: AssayRunner, profile: str, key: str
) -> None:
    done = run_assay("init", str(tmp_path / "repo"), "--cli", profile, "--json")
    assert done.returncode == 0, done.stderr
    written = {row["path"] for row in json.loads(done.stdout)["files"]}
    assert f"desks/{profile}.yaml" in written
    desk = load_desks(tmp_path / "repo" / "desks")[profile]
    assert desk.kind == "cli" and desk.cli is not None and desk.cli.profile == profile
    assert desk.model is not None and desk.model.api_key_env == key
    assert desk.sandbox_spec().network == "gateway"


def test_init_without_cli_writes_no_cli_desk(tmp_path: Path, run_assay: AssayRunner) -> None:
    done = run_assay("init", str(tmp_path / "repo"), "--json")
    assert done.returncode == 0, done.stderr
    assert not list((tmp_path / "repo" / "desks").glob("claude-code.yaml"))


def test_init_refuses_an_unknown_cli(tmp_path: Path, run_assay: AssayRunner) -> None:
    done = run_assay("init", str(tmp_path / "repo"), "--cli", "teleporter")
    assert done.returncode == 2
    assert not (tmp_path / "repo").exists()


def _install_step() -> dict[str, object]:
    workflow = yaml.safe_load((WORKFLOW / "assay-desk.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["desk"]["steps"]
    (step,) = [s for s in steps if str(s.get("name", "")).startswith("Install the agent CLI")]
    return step


@pytest.mark.parametrize(
    ("desk", "expected"),
    [
        ("claude-code", "@anthropic-ai/claude-code@"),
        ("codex", "@openai/codex@"),
        ("gemini-cli", "@google/gemini-cli@"),
        ("qwen-code", "@qwen-code/qwen-code@"),
        ("opencode", "opencode-ai@"),
        ("aider", "pipx: install aider-chat=="),
        ("mini-swe-agent", "pipx: install mini-swe-agent=="),
        ("example", ""),
        ("missing", ""),
    ],
)
def test_the_desk_workflow_installs_the_cli_the_desk_names(
    tmp_path: Path, run_assay: AssayRunner, desk: str, expected: str
) -> None:
    repo = tmp_path / "repo"
    for profile in CLI_DESKS:
        run_assay("init", str(repo), "--cli", profile)
    script = str(_install_step()["run"])
    # Run the step's script with npm and pipx replaced by recorders: it must name the pinned
    # package (npm for the node CLIs, pipx for the Python ones: a venv each).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npm").write_text('#!/bin/sh\necho "$@" > "$NPM_LOG"\n', encoding="utf-8")
    (bin_dir / "npm").chmod(0o755)
    (bin_dir / "pipx").write_text('#!/bin/sh\necho "pipx: $@" > "$NPM_LOG"\n', encoding="utf-8")
    (bin_dir / "pipx").chmod(0o755)
    log = tmp_path / "npm.log"
    env = {
        **os.environ,
        "DESK": desk,
        "NPM_LOG": str(log),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }
    done = subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if expected:
        assert expected in log.read_text()
    else:
        assert not log.exists()


def test_a_desk_name_that_is_not_a_name_installs_nothing(tmp_path: Path) -> None:
    script = str(_install_step()["run"])
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env={**os.environ, "DESK": "../../etc/passwd; rm -rf ~"},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "not a desk name" in done.stderr


def test_the_model_keys_reach_only_the_desk_step() -> None:
    workflow = yaml.safe_load((WORKFLOW / "assay-desk.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["desk"]["steps"]
    holding = [s["name"] for s in steps if "secrets.ANTHROPIC_API_KEY" in str(s.get("env", {}))]
    assert holding == ["Run the desk once"]


def test_init_prints_the_ruleset_that_makes_main_need_the_gate(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    done = run_assay("init", str(tmp_path / "repo"), "--json")
    assert done.returncode == 0, done.stderr
    ruleset = json.loads(done.stdout)["ruleset"]
    assert ruleset["target"] == "branch" and ruleset["enforcement"] == "active"
    assert ruleset["conditions"]["ref_name"]["include"] == ["~DEFAULT_BRANCH"]
    kinds = {rule["type"]: rule for rule in ruleset["rules"]}
    assert {"deletion", "non_fast_forward", "required_status_checks"} <= set(kinds)
    checks = kinds["required_status_checks"]["parameters"]["required_status_checks"]
    # Pinned to the GitHub Actions app: another app's look-alike check does not count.
    assert checks == [{"context": "assay/evidence", "integration_id": 15368}]
    shown = run_assay("init", str(tmp_path / "other"))
    assert "gh api -X POST repos/OWNER/REPO/rulesets --input - <<'JSON'\n" in shown.stdout
    assert json.loads(shown.stdout.split("<<'JSON'\n")[1].split("\nJSON")[0]) == ruleset
