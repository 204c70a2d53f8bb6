"""Secrets: a configured secret value reaches no journal file and no output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import AssayRunner
from tests.runtime.helpers import desk

SECRET = "sk-live-9f83b2c4d1e0a7"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_secret_handled_by_every_kind_of_step_is_in_no_journal_file(
    tmp_path: Path, run_assay: AssayRunner, how: str
) -> None:
    journal = tmp_path / "j"
    env = {"SECRET_TOKEN": SECRET}
    args = [
        "run",
        desk("small.py:leaky"),
        "--journal",
        str(journal),
        "--model",
        desk("small.py:make_echo_model"),
    ]
    if how == "flag":
        args += ["--secret-env", "SECRET_TOKEN"]
    else:
        env["ASSAY_SECRET_ENV"] = "OTHER_UNSET,SECRET_TOKEN"
    done = run_assay(*args, "--json", env=env)
    assert done.returncode == 0, done.stderr
    files = [p for p in journal.rglob("*") if p.is_file()]
    assert any("blobs" in p.parts for p in files)  # the message went to a blob
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in done.stdout and SECRET not in done.stderr
    history = run_assay("history", "--journal", str(journal), "--json")
    assert history.returncode == 0 and SECRET not in history.stdout
    assert "[redacted]" in history.stdout


def test_without_configuration_the_same_run_would_leak(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    # proves the test above can fail: the desk really writes the value somewhere (held by a
    # variable whose name does not say "credential", so only configuration would hide it)
    journal = tmp_path / "j"
    args = [
        "run",
        desk("small.py:leaky"),
        "--journal",
        str(journal),
        "--model",
        desk("small.py:make_echo_model"),
    ]
    env = {"PLAIN_VALUE": SECRET, "LEAKY_ENV": "PLAIN_VALUE"}
    assert run_assay(*args, env=env).returncode == 0
    assert any(SECRET.encode() in p.read_bytes() for p in journal.rglob("*") if p.is_file())


def test_a_variable_named_like_a_credential_is_redacted_without_configuration(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    journal = tmp_path / "j"
    args = ["run", desk("small.py:leaky"), "--journal", str(journal)]
    args += ["--model", desk("small.py:make_echo_model")]
    assert run_assay(*args, env={"SECRET_TOKEN": SECRET}).returncode == 0
    assert not any(SECRET.encode() in p.read_bytes() for p in journal.rglob("*") if p.is_file())
