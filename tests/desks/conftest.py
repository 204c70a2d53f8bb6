"""Fixtures of the desk tests: a ``World`` (forge + desks folder) whose processes die with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.desks.world import World


@pytest.fixture
def world(tmp_path: Path, forge_path: Path) -> Iterator[World]:
    made = World(root=tmp_path, forge_path=forge_path)
    try:
        yield made
    finally:
        made.stop_all()


@pytest.fixture
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The upstream key of the cli desks' model (``ASSAY_TEST_UPSTREAM_KEY``)."""
    from tests.desks.cli_helpers import KEY

    monkeypatch.setenv("ASSAY_TEST_UPSTREAM_KEY", KEY)
