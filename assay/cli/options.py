"""Options shared by many commands, so every command spells them the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class _OutputMode:
    """Whether this invocation asked for ``--json``; read by the error handler in ``main``."""

    json = False


output_mode = _OutputMode()


def _remember_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        output_mode.json = True
    return value


def json_option(fn: F) -> F:
    """``--json``: print one JSON document on stdout instead of a table."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        callback=_remember_json,
        is_eager=True,
        help="Print machine-readable JSON on stdout.",
    )(fn)


def forge_option(fn: F) -> F:
    """``--forge URL_OR_PATH`` (or ``ASSAY_FORGE``): where shared state lives."""
    return click.option(
        "--forge",
        "forge",
        envvar="ASSAY_FORGE",
        default=None,
        metavar="URL_OR_PATH",
        help="The forge: a path, file://, git://, http(s)://, or github:OWNER/REPO "
        "(default: $ASSAY_FORGE).",
    )(fn)
