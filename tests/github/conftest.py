"""Fixtures of the GitHub area: the fake GitHub server, failing the test on any violation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.github.fake_github import FakeGitHub


@pytest.fixture
def fake_github(tmp_path: Path) -> Iterator[FakeGitHub]:
    """A started fake GitHub (``acme/widgets``); any contract violation fails the test."""
    with FakeGitHub(tmp_path / "github") as fake:
        yield fake
    assert not fake.violations, "GitHub contract violations:\n" + "\n".join(fake.violations)
