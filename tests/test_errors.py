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


def test_every_public_error_class_is_drawn_in_the_tree() -> None:
    """errors.py's docstring draws the whole tree, classes defined elsewhere included."""
    import importlib
    import pkgutil

    import assay

    for module in pkgutil.walk_packages(assay.__path__, "assay."):
        importlib.import_module(module.name)
    pending: list[type[errors.AssayError]] = [errors.AssayError]
    found: list[type[errors.AssayError]] = []
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    drawing = errors.__doc__ or ""
    missing = [c.__name__ for c in found if not c.__name__.startswith("_")]
    missing = [name for name in missing if f" {name} " not in drawing.replace("\n", " \n")]
    assert missing == []
