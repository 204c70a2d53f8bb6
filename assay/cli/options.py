"""Options shared by many commands, so every command spells them the same way, and the
one way a command prints its ``--json`` result (``print_result``: with the REST calls made)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
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


# What ``RestStats().to_json()`` is before any call: reported without importing the REST
# client (and httpx) into commands that never opened a GitHub forge.
_NO_REST_CALLS: dict[str, Any] = {
    "calls": 0,
    "charged": 0,
    "not_modified": 0,
    "writes": 0,
    "retries": 0,
    "waited_s": 0.0,
}


def rest_calls() -> dict[str, Any]:
    """The REST calls this process made (``assay.github.rest.process_stats()``), as JSON.

    Zeros on the embedded forge: no GitHub client was ever made, so the module is not even
    loaded. (A command's claims, journals and events travel over git and cost none.)
    """
    rest = sys.modules.get("assay.github.rest")
    if rest is None:
        return dict(_NO_REST_CALLS)
    stats: dict[str, Any] = rest.process_stats().to_json()
    return stats


def print_result(payload: Mapping[str, Any]) -> None:
    """Print a command's ``--json`` result, with ``rest``: the REST calls it made."""
    from assay.console import print_json  # rich: only once there is something to print

    print_json({**payload, "rest": rest_calls()})


def serve_options(fn: F) -> F:
    """``--host`` and ``--port`` of the commands that serve a forge over smart HTTP."""
    fn = click.option(
        "--port",
        default=0,
        show_default=True,
        type=click.IntRange(0, 65535),
        help="Port to bind; 0 picks a free one (printed).",
    )(fn)
    return click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")(
        fn
    )


def serve_until_stopped(server: Any, *also: Callable[[], None]) -> None:
    """Serve until Ctrl-C or SIGTERM, then stop the server and everything in ``also``."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        for then in also:
            then()


def journal_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """``--journal DIR``: a local run's journal directory (``journal_dir``)."""
    from pathlib import Path

    return click.option(
        "--journal",
        "journal_dir",
        required=required,
        default=None,
        type=click.Path(file_okay=False, path_type=Path),
        help=help,
    )
