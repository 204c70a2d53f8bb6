"""The torture suites' switch: ``ASSAY_TORTURE=full`` runs the long versions.

By default (CI) every suite runs a short version, the whole folder in under two minutes on
a 2-core machine. ``ASSAY_TORTURE=full`` raises the counts (at least 200 SIGKILLs in the
crash torture, more fuzz examples, more forge faults) and the per-test timeouts.
``ASSAY_TORTURE_SEED`` fixes the random instants (default: a fixed seed, so a failure
reproduces; the seed is in every assertion message).
"""

from __future__ import annotations

import os

import pytest

FULL = os.environ.get("ASSAY_TORTURE", "").strip().lower() == "full"
SEED = int(os.environ.get("ASSAY_TORTURE_SEED", "20261129"))


def pick(short: int, full: int) -> int:
    return full if FULL else short


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The full versions run far longer than the default per-test timeout."""
    if FULL:
        for item in items:
            if "tests/torture" in str(item.fspath):
                item.add_marker(pytest.mark.timeout(3600))
