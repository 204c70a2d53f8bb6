"""``assay forge init`` and ``assay forge serve``: make and serve an embedded forge."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from assay.cli.options import json_option, serve_options, serve_until_stopped
from assay.console import err, out, print_json
from assay.evidence.keys import create_key
from assay.forge.connections import IDLE_TIMEOUT_S, MAX_CONNECTIONS
from assay.forge.embedded import init_forge
from assay.forge.serve import ForgeServer


@click.group("forge")
def forge_group() -> None:
    """Make and serve an embedded forge (a bare git repository that is a whole forge)."""


@forge_group.command("init")
@click.argument("path", type=click.Path(path_type=Path))
@json_option
def init_command(path: Path, as_json: bool) -> None:
    """Create an embedded forge at PATH: main with briefs/ and .gitattributes.

    Also makes the gate's signing key, outside the forge, in the gate's state directory
    ($ASSAY_GATE_STATE, else $ASSAY_STATE/gate), unless one is there already.
    """
    made = init_forge(path)
    key = create_key()
    if as_json:
        print_json(
            {
                "status": "ok",
                "code": 0,
                "path": str(made),
                "url": f"file://{made}",
                "gate_key": str(key),
            }
        )
    else:
        out.print(f"forge ready at {made}", markup=False, highlight=False)
        out.print(f"gate key at {key} (keep it off the forge)", markup=False, highlight=False)


@forge_group.command("serve")
@click.argument("path", type=click.Path(path_type=Path))
@serve_options
@click.option(
    "--max-connections",
    default=MAX_CONNECTIONS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Requests served at once; more wait their turn.",
)
@click.option(
    "--idle-timeout",
    default=IDLE_TIMEOUT_S,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a client may be silent (or take over its headers) before it is dropped.",
)
@json_option
def serve_command(
    path: Path, host: str, port: int, max_connections: int, idle_timeout: float, as_json: bool
) -> None:
    """Serve the forge at PATH over smart HTTP (pushes enabled) until interrupted.

    The first line printed is the URL to pass to --forge.
    """
    server = ForgeServer(
        path, host=host, port=port, max_connections=max_connections, idle_timeout=idle_timeout
    )
    if as_json:
        print_json({"status": "ok", "code": 0, "url": server.url, "port": server.port})
    else:
        sys.stdout.write(server.url + "\n")
        sys.stdout.flush()
        err.print(f"serving {server.path} (Ctrl-C stops)", markup=False, highlight=False)
    serve_until_stopped(server)


def register(root: click.Group) -> None:
    """Add ``assay forge`` to the root group."""
    root.add_command(forge_group)
