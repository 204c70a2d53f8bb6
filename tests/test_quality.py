"""Lint, format and type checks, so the README's one test command runs them too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=280
    )


def test_ruff_lint_is_clean() -> None:
    done = _run("ruff", "check", "assay", "tests")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean() -> None:
    done = _run("ruff", "format", "--check", "assay", "tests")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_strict_on_the_package() -> None:
    done = _run("mypy", "assay")
    assert done.returncode == 0, done.stdout + done.stderr
