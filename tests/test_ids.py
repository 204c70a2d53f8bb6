"""Brief ids: only names that are safe in refs, branches and paths."""

from __future__ import annotations

import pytest

from assay.errors import BadInput
from assay.ids import check_id


@pytest.mark.parametrize("good", ["fix-login", "B_12", "v1.2-notes", "a" * 100])
def test_safe_ids_pass(good: str) -> None:
    assert check_id(good) == good


@pytest.mark.parametrize(
    "bad",
    ["", "a/b", "..", "a..b", ".hidden", "x.lock", "tab\there", "nul\x00", "a" * 101, "sp ace"],
)
def test_unsafe_ids_are_bad_input(bad: str) -> None:
    with pytest.raises(BadInput) as caught:
        check_id(bad, where="briefs/x.md")
    assert caught.value.code == 65
    assert "briefs/x.md" in caught.value.message
