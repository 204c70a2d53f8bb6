"""``assay desk serve`` and ``assay desk host``: the resident processes that wake runs.

``serve`` serves the forge and wakes runs after the pushes that move an events ref or
main; ``host`` stays resident and forks a child per wake the forge's hook sends.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from assay.cli.desk_common import DeskPlace, desk_options
from assay.cli.options import forge_option, serve_options, serve_until_stopped
from assay.console import err


@click.command("serve")
@click.argument("path", type=click.Path(path_type=Path))
@serve_options
@desk_options
def desk_serve(
    path: Path,
    host: str,
    port: int,
    place: DeskPlace,
) -> None:
    """Serve the forge at PATH over smart HTTP and wake waiting runs as events arrive.

    The first line printed is the URL to pass to --forge. After every push that moves
    an events ref or main, the runs whose event has arrived are resumed here.
    """
    from assay.sandbox.shield import make_undumpable

    make_undumpable()  # before any secret is read: nothing beside us may read our environ
    from assay.desks.host.resync import next_timer, wake
    from assay.desks.host.waker import Waker
    from assay.forge import ForgeServer

    desks = place.desks()
    server = ForgeServer(path, host=host, port=port)

    def wake_once() -> list[Any]:
        with place.open(str(path)) as forge:
            return wake(forge, desks, workroot=place.workroot, holder=place.holder)

    def show(report: Any) -> None:
        err.print(
            f"woke {report.brief}: {report.status} ({report.code})",
            markup=False,
            highlight=False,
        )

    def timer() -> Any:
        with place.open(str(path)) as forge:
            return next_timer(forge)

    waker = Waker(path, wake_once, on_report=show, next_timer=timer)
    server.on_push = waker.poke
    sys.stdout.write(server.url + "\n")
    sys.stdout.flush()

    waker.start()
    serve_until_stopped(server, waker.stop)


@click.command("host")
@click.option(
    "--socket",
    "socket_path",
    default=None,
    metavar="PATH",
    help="Unix socket the forge's wake hook writes to (default: $ASSAY_STATE/desk-host.sock).",
)
@click.option(
    "--log",
    "log_path",
    default=None,
    metavar="FILE",
    help="Where the children's output goes (default: next to the socket).",
)
@forge_option
@desk_options
def desk_host(
    socket_path: str | None,
    log_path: str | None,
    forge: str | None,
    place: DeskPlace,
) -> None:
    """Stay resident, pre-imported, and fork a child per wake the forge's hook sends.

    Install the hook with `assay sweep install-hook --host-socket PATH`. Each
    `wake <brief>` line on the socket forks a child that resumes that brief's waiting
    run if its event has arrived (as `assay wake --brief` does). The first line printed
    is the socket's path. SIGTERM stops it after the running children end; children
    die with the host if it is killed.
    """
    import signal as signals

    from assay.desks.host.resident import DeskHost, preload, wake_in_child
    from assay.errors import BadInput

    if not forge:
        raise BadInput("--forge (or ASSAY_FORGE) names the forge the host wakes runs on")
    state = os.environ.get("ASSAY_STATE")
    default_dir = Path(state) if state else Path.home() / ".cache" / "assay"
    where = Path(socket_path) if socket_path else default_dir / "desk-host.sock"
    if place.holder:
        os.environ["ASSAY_HOLDER"] = place.holder
    preload()
    host = DeskHost(
        socket_path=where,
        wake_one=wake_in_child(
            forge,
            Path(place.desks_dir),
            workroot=place.workroot,
            cache=place.cache_dir,
            log=Path(log_path) if log_path else where.with_suffix(".log"),
        ),
        on_line=lambda line: err.print(line, markup=False, highlight=False),
    )
    server = host.bind()
    signals.signal(signals.SIGTERM, host.stop)
    signals.signal(signals.SIGINT, host.stop)
    sys.stdout.write(f"{where}\n")
    sys.stdout.flush()
    host.serve_forever(server)
