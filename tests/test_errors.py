"""The error tree carries the exit codes of DESIGN.md section 8."""

from __future__ import annotations

import pytest

from assay import errors


@pytest.mark.parametrize(
    ("cls", "code", "status"),
    [
        (errors.Failed, 1, "failed"),
        (errors.UsageError, 2, "usage"),
        (errors.Busy, 3, "busy"),
        (errors.Fenced, 4, "fenced"),
        (errors.Diverged, 5, "diverged"),
        (errors.Corrupt, 6, "corrupt"),
        (errors.Paused, 7, "paused"),
        (errors.BadInput, 65, "bad_input"),
        (errors.Unavailable, 69, "unavailable"),
        (errors.ForgeUnavailable, 69, "unavailable"),
        (errors.Internal, 70, "internal"),
        (errors.Suspended, 75, "suspended"),
        (errors.Denied, 77, "denied"),
        (errors.SandboxUnavailable, 78, "sandbox_unavailable"),
    ],
)
def test_each_error_carries_its_code(cls: type[errors.AssayError], code: int, status: str) -> None:
    error = cls("something went wrong")
    assert isinstance(error, errors.AssayError)
    assert (error.code, error.status) == (code, status)
    assert error.to_json() == {"status": status, "code": code, "message": "something went wrong"}
    assert errors.EXIT_CODES[status] == code


def test_suspension_escapes_except_exception() -> None:
    caught_by_desk_code = False
    with pytest.raises(errors.Suspension):
        try:
            raise errors.Suspension("approval")
        except Exception:
            caught_by_desk_code = True
    assert not caught_by_desk_code
