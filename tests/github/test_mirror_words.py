"""The claim mirror's issue comment names each claim state as it is, never as another."""

from __future__ import annotations

import pytest

from assay.claims import ClaimRecord
from assay.github.mirror import claim_comment
from assay.states import CLAIM_STATES


def _record(state: str) -> ClaimRecord:
    return ClaimRecord(
        brief="b1",
        desk="coder",
        holder="0123456789abcdef",
        fence=3,
        state=state,
        since="2026-12-01T10:00:00Z",
        renewed_at="2026-12-01T10:00:05Z",
        lease_s=30.0,
        waiting_for="approval" if state == "waiting" else None,
    )


@pytest.mark.parametrize("state", sorted(CLAIM_STATES))
def test_every_claim_state_is_worded_as_itself(state: str) -> None:
    text = claim_comment("b1", _record(state))
    assert f"**{state}**" in text
    assert "desk `coder` (holder `01234567`, fence 3)" in text


def test_a_state_without_its_own_sentence_is_named_not_called_released() -> None:
    text = claim_comment("b1", _record("parked"))
    assert "**parked**" in text and "released" not in text
