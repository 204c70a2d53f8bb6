"""Fixtures of the GitHub area: the fake GitHub server, failing the test on any violation.

GitHub's push budget (6 pushes a minute per repository) is on in every test here, in the
fake and in the client alike, over a minute shortened to ``TEST_WINDOW_S`` through the one
setting both read (``ASSAY_FORGE_BUDGET_WINDOW_SECONDS``): a lifecycle that takes minutes
on GitHub runs here in seconds, and every push still keeps to the budget (a test that
pushes past it is refused by the fake, as GitHub would throttle it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.forge.budget import WINDOW_ENV
from tests.github.fake_github import TEST_WINDOW_S, FakeGitHub


@pytest.fixture(autouse=True, scope="module")
def short_push_window() -> Iterator[None]:
    """The budget's minute is ``TEST_WINDOW_S`` for every fake and client of the module
    (module scope: the module-wide fakes are made under it too)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(WINDOW_ENV, TEST_WINDOW_S)
        yield


@pytest.fixture
def fake_github(tmp_path: Path) -> Iterator[FakeGitHub]:
    """A started fake GitHub (``acme/widgets``); any contract violation fails the test."""
    with FakeGitHub(tmp_path / "github") as fake:
        yield fake
    assert not fake.violations, "GitHub contract violations:\n" + "\n".join(fake.violations)
