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


def _public_exceptions() -> list[type[BaseException]]:
    """Every public exception class any module of assay/ defines."""
    import importlib
    import inspect
    import pkgutil

    import assay

    found = []
    for info in pkgutil.walk_packages(assay.__path__, "assay."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not name.startswith("_")
            ):
                found.append(obj)
    return found


def test_every_public_error_class_is_drawn_in_the_tree() -> None:
    """errors.py's docstring draws every public exception of assay/: AssayError's tree, and
    the few signals kept outside it on purpose."""
    drawing = (errors.__doc__ or "").replace("\n", " \n")
    classes = _public_exceptions()
    from assay.plumbing import GitError

    assert GitError in classes and errors.Suspension in classes  # the walk reaches every module
    missing = sorted({c.__name__ for c in classes if f" {c.__name__} " not in drawing})
    assert missing == []
