"""Credentials stay off command lines, and secret files are read once and removed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from assay.evidence.keys import gate_key
from assay.github.target import resolve_target
from assay.journal import secrets_from_env
from assay.plumbing import run_git
from tests.gatekeys import key_for

HEADER = "http.https://git.example/.extraHeader"
VALUE = "Authorization: Basic Y2FuYXJ5LWNyZWQ="


def test_git_gets_config_in_its_environment_never_in_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real git reads it...
    done = run_git(["config", "--get", HEADER], config={HEADER: VALUE}, cwd=tmp_path)
    assert done.stdout.decode().strip() == VALUE
    # ...and a git that records what it was given shows where it travelled.
    spy = tmp_path / "bin" / "git"
    spy.parent.mkdir()
    record = tmp_path / "seen"
    spy.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}.argv\nenv > {record}.env\n')
    spy.chmod(spy.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{spy.parent}{os.pathsep}{os.environ['PATH']}")
    run_git(["fetch", "https://git.example/r.git"], config={HEADER: VALUE}, cwd=tmp_path)
    assert "Basic" not in (tmp_path / "seen.argv").read_text()
    env = (tmp_path / "seen.env").read_text()
    assert f"GIT_CONFIG_VALUE_0={VALUE}" in env and "GIT_CONFIG_COUNT=1" in env


def test_a_credential_named_variable_is_a_secret_whether_or_not_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASSAY_MODEL_API_KEY", "canary-model-key-1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "A Person Named")  # an identity, not a credential
    values = secrets_from_env()
    assert "canary-model-key-1" in values and "A Person Named" not in values


def test_secret_files_are_read_once_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, token = tmp_path / "key", tmp_path / "token"
    canary = key_for("canary-evidence-key")
    key.write_text(canary.text + "\n")
    token.write_text("canary-token\n")
    taken = gate_key({"ASSAY_EVIDENCE_KEY_FILE": str(key)})
    assert taken is not None and taken.seed == canary.seed
    assert not key.exists()
    again = gate_key({"ASSAY_EVIDENCE_KEY_FILE": str(key)})
    assert again is not None and again.seed == canary.seed
    assert canary.text not in repr(again)  # a traceback or log line never shows the key
    target = resolve_target("github:acme/widgets", environ={"ASSAY_GITHUB_TOKEN_FILE": str(token)})
    assert target.token == "canary-token" and not token.exists()


def test_the_supervisor_can_make_itself_undumpable() -> None:
    import subprocess
    import sys

    code = (
        "from assay.sandbox.shield import is_dumpable, make_undumpable\n"
        "assert is_dumpable(); assert make_undumpable(); assert not is_dumpable()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_a_row_never_gets_a_secret_copied_under_a_harmless_name() -> None:
    from assay.evidence.runner import row_environment

    source = {"GITHUB_TOKEN": "canary-token-1234", "GH_COPY": "x canary-token-1234", "LANG": "C"}
    env = row_environment(source)
    assert "GITHUB_TOKEN" not in env and "GH_COPY" not in env and env["LANG"] == "C"
