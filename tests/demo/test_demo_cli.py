"""``assay demo --cli``: the demo's story told by a real agent CLI (installed by
``.ci/install``) in a ``kind: cli`` desk, against the scripted upstream that ships with the
demo; and the typed errors for a CLI that is unknown or not installed."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.agentcli.clis import cli_path
from tests.conftest import assay_argv, assay_env
from tests.demo.test_demo import (
    assert_main_is_the_teams,
    assert_the_refused_review_shows_only_code,
    assert_the_story_was_told,
)

BINARIES = {"codex": "codex", "claude-code": "claude", "gemini-cli": "gemini"}


def run_demo(directory: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        assay_argv("demo", "--dir", str(directory), "--json", *args),
        env=env,
        cwd=directory.parent,
        capture_output=True,
        text=True,
        timeout=400,
    )


@pytest.mark.slow
@pytest.mark.timeout(420)  # past the demo's own deadline (300 s): its report says what hung
@pytest.mark.parametrize("cli", ["codex", "claude-code", "gemini-cli"])
def test_a_real_cli_tells_the_whole_story(tmp_path: Path, cli: str) -> None:
    directory = tmp_path / "run"
    program = cli_path(BINARIES[cli])
    env = assay_env({"PATH": os.pathsep.join([str(program.parent), os.environ["PATH"]])})
    done = run_demo(directory, "--cli", cli, "--seed", "3", env=env)
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    assert report["problems"] == []
    assert done.returncode == 0
    assert report["cli"] == cli
    assert_the_story_was_told(report)
    assert report["model_calls"] > 0
    desk = yaml.safe_load((directory / "desks" / "demo.yaml").read_text(encoding="utf-8"))
    assert desk["kind"] == "cli" and desk["cli"] == {"profile": cli}
    assert "finish" in desk["tools"]
    calls = (directory / "model-calls.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(calls) == report["model_calls"]  # the upstream's own log, not a desk's account
    # The kill lands inside a model call the upstream holds: that request reached it, and the
    # resumed run sent it again. It is answered once, but it was requested twice.
    requests = (directory / "model-requests.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(requests) == len(calls) + 1
    assert report["repeated_requests"] == 1
    crash = [line for line in requests if '"reverse-words"' in line]
    assert len(crash) == len(set(crash)) + 1  # one brief and turn, twice
    assert "1 (the call in flight" in story_rows(report)["model requests repeated upstream"]
    # The team's repository after it: main holds the merged briefs' code alone, one commit
    # each; every merged run reads back whole from its run ref; the refused brief's review
    # shows only its code.

    def history(brief: str) -> subprocess.CompletedProcess[str]:
        forge = str(report["forge_path"])
        argv = assay_argv("history", "--brief", brief, "--forge", forge, "--json")
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)

    assert_main_is_the_teams(report, history)
    assert_the_refused_review_shows_only_code(report)


def story_rows(report: dict[str, object]) -> dict[str, str]:
    """The summary table the demo prints without --json, rendered from its report."""
    from rich.console import Console

    from assay.cli.demo import _summary
    from assay.demo import DemoReport

    fields = {k: v for k, v in report.items() if k in DemoReport.__dataclass_fields__}
    console = Console(file=io.StringIO(), width=200)
    console.print(_summary(DemoReport(**fields)))  # type: ignore[arg-type]
    text = console.file.getvalue()  # type: ignore[attr-defined]
    rows = [line.split("│") for line in text.splitlines() if line.count("│") == 3]
    return {cells[1].strip(): cells[2].strip() for cells in rows}


def test_an_unknown_cli_is_bad_input_naming_the_option(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    done = run_demo(directory, "--cli", "vim", env=assay_env())
    assert done.returncode == 65, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "bad_input"
    assert "--cli" in report["message"] and "codex" in report["message"]
    assert not directory.exists()  # nothing written


def test_a_cli_that_is_not_installed_is_bad_input_naming_the_option(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    bare = [p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "codex").exists()]
    env = assay_env({"PATH": os.pathsep.join(bare), "ASSAY_AGENT_CLIS": str(tmp_path / "none")})
    done = run_demo(directory, "--cli", "codex", env=env)
    assert done.returncode == 65, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "bad_input"
    assert "--cli codex" in report["message"] and "not installed" in report["message"]
    assert not directory.exists()
