"""Fixtures of the sandbox tests: a ``World`` (forge + desks folder) whose processes die with it."""

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
