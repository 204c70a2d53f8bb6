"""``assay desk run``, ``assay wake``, ``assay resync`` and ``assay cancel``.

A thin layer over ``assay.desks.host.loop`` and ``assay.desks.host.resync``: options, the table (or
``--json``) and the exit code of DESIGN.md section 8.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from assay.cli.options import forge_option, json_option, print_result, serve_options
from assay.console import err, fitted_table, out

DESKS_HELP = "Directory of desk manifests (default: ./desks)."


def _exit(code: int) -> None:
    """Exit with ``code`` after printing our own result.

    (``click.exceptions.Exit`` is turned into a return value by click when the root runs
    with ``standalone_mode=False``, so the code would be lost.)
    """
    sys.stdout.flush()
    sys.exit(code)


def _workroot(value: str | None) -> Path:
    if value:
        return Path(value)
    state = os.environ.get("ASSAY_STATE")
    return (Path(state) if state else Path.home() / ".cache" / "assay") / "work"


def _progress(as_json: bool) -> Any:
    def show(line: str) -> None:
        if not as_json:
            err.print(line, markup=False, highlight=False)

    return show


def _open(forge_spec: str | None, cache: str | None) -> Any:
    from assay.forge import open_forge

    return open_forge(forge_spec, cache_dir=Path(cache) if cache else None)


def _load_desks(directory: str) -> dict[str, Any]:
    from assay.desks import load_desks

    return load_desks(Path(directory))


def _print_reports(reports: list[Any], *, as_json: bool, code: int) -> None:
    if as_json:
        print_result(
            {
                "status": "ok" if code == 0 else "done",
                "code": code,
                "runs": [r.to_json() for r in reports],
            }
        )
        return
    table = fitted_table(
        ("brief", "why", "status", "code", "steps", "review", "waiting for"),
        [
            (r.brief, r.why, r.status, str(r.code), str(r.steps), r.review, r.waiting_for or "")
            for r in reports
        ],
        drop=("steps", "code", "waiting for"),
    )
    out.print(table)
    for r in reports:
        if r.code and r.message:
            err.print(f"{r.brief}: {r.status}: {r.message}", markup=False, highlight=False)


def _common(fn: Any) -> Any:
    fn = click.option("--desks", "desks_dir", default="desks", metavar="DIR", help=DESKS_HELP)(fn)
    fn = click.option(
        "--cache",
        envvar="ASSAY_CACHE",
        default=None,
        metavar="DIR",
        help="Local cache repository for the forge (default: per forge URL).",
    )(fn)
    fn = click.option(
        "--workdir",
        envvar="ASSAY_WORKDIR",
        default=None,
        metavar="DIR",
        help="Where briefs are checked out (default: $ASSAY_STATE/work).",
    )(fn)
    fn = click.option(
        "--holder",
        envvar="ASSAY_HOLDER",
        default=None,
        metavar="TOKEN",
        help="Holder token for claims (default: host, pid and a random suffix).",
    )(fn)
    return fn


def register(root: click.Group) -> None:
    """Add this module's commands to the root group."""

    @root.group("desk")
    def desk_group() -> None:
        """Run desks: take briefs from the forge and work on them durably."""

    @desk_group.command("run")
    @click.argument("name")
    @click.option("--once", is_flag=True, help="Run one brief, then exit with its code.")
    @click.option("--brief", "brief_id", default=None, metavar="ID", help="Run only this brief.")
    @forge_option
    @_common
    @json_option
    def desk_run(
        name: str,
        once: bool,
        brief_id: str | None,
        forge: str | None,
        desks_dir: str,
        cache: str | None,
        workdir: str | None,
        holder: str | None,
        as_json: bool,
    ) -> None:
        """Take the highest-priority claimable brief this desk takes, run it, repeat.

        Exit codes: 0 done, 1 failed, 3 nothing claimable, 4 fenced, 7 paused,
        65 bad input, 69 unavailable, 75 waiting, 77 denied, 78 no sandbox.
        """
        from assay.sandbox.shield import make_undumpable

        make_undumpable()  # before any secret is read: nothing beside us may read our environ
        from assay.desks.host.loop import DeskLoop, default_holder, exit_code, run_slots
        from assay.errors import BadInput

        desks = _load_desks(desks_dir)
        if name not in desks:
            raise BadInput(
                f"{desks_dir}: no desk named {name!r} (have: {', '.join(sorted(desks))})"
            )
        manifest = desks[name]
        base_holder = holder or default_holder()
        # python desks run with the work tree as working directory: one slot per process.
        slots = 1 if manifest.kind == "python" else int(manifest.concurrency)

        def make_loop(index: int) -> DeskLoop:
            return DeskLoop(
                forge=_open(forge, cache),
                desk=manifest,
                desks_dir=Path(desks_dir),
                workroot=_workroot(workdir) / name,
                holder=base_holder if slots == 1 else f"{base_holder}-{index}",
                on_progress=_progress(as_json),
            )

        reports = run_slots(make_loop, concurrency=slots, once=once, only=brief_id)
        code = exit_code(reports)
        _print_reports(reports, as_json=as_json, code=code)
        if code:
            _exit(code)

    @desk_group.command("serve")
    @click.argument("path", type=click.Path(path_type=Path))
    @serve_options
    @_common
    def desk_serve(
        path: Path,
        host: str,
        port: int,
        desks_dir: str,
        cache: str | None,
        workdir: str | None,
        holder: str | None,
    ) -> None:
        """Serve the forge at PATH over smart HTTP and wake waiting runs as events arrive.

        The first line printed is the URL to pass to --forge. After every push that moves
        an events ref or main, the runs whose event has arrived are resumed here.
        """
        import signal as signals

        from assay.sandbox.shield import make_undumpable

        make_undumpable()  # before any secret is read: nothing beside us may read our environ
        from assay.desks.host.resync import wake
        from assay.desks.host.waker import Waker
        from assay.forge import ForgeServer

        desks = _load_desks(desks_dir)
        server = ForgeServer(path, host=host, port=port)

        def wake_once() -> list[Any]:
            with _open(str(path), cache) as forge:
                return wake(forge, desks, workroot=_workroot(workdir), holder=holder)

        def show(report: Any) -> None:
            err.print(
                f"woke {report.brief}: {report.status} ({report.code})",
                markup=False,
                highlight=False,
            )

        waker = Waker(path, wake_once, on_report=show)
        server.on_push = waker.poke
        sys.stdout.write(server.url + "\n")
        sys.stdout.flush()

        def stop(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        signals.signal(signals.SIGTERM, stop)
        waker.start()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
            waker.stop()

    @desk_group.command("host")
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
    @_common
    def desk_host(
        socket_path: str | None,
        log_path: str | None,
        forge: str | None,
        desks_dir: str,
        cache: str | None,
        workdir: str | None,
        holder: str | None,
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
        if holder:
            os.environ["ASSAY_HOLDER"] = holder
        preload()
        host = DeskHost(
            socket_path=where,
            wake_one=wake_in_child(
                forge,
                Path(desks_dir),
                workroot=_workroot(workdir),
                cache=Path(cache) if cache else None,
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

    @root.command("wake")
    @click.option("--brief", "brief_id", default=None, metavar="ID", help="Wake only this brief.")
    @forge_option
    @_common
    @json_option
    def wake_cmd(
        brief_id: str | None,
        forge: str | None,
        desks_dir: str,
        cache: str | None,
        workdir: str | None,
        holder: str | None,
        as_json: bool,
    ) -> None:
        """Resume every waiting run whose event or timer has arrived."""
        from assay.sandbox.shield import make_undumpable

        make_undumpable()  # before any secret is read: nothing beside us may read our environ
        from assay.desks.host.loop import exit_code
        from assay.desks.host.resync import wake

        reports = wake(
            _open(forge, cache),
            _load_desks(desks_dir),
            workroot=_workroot(workdir),
            only=brief_id,
            holder=holder,
            on_progress=_progress(as_json),
        )
        code = exit_code(reports, nothing=0)
        _print_reports(reports, as_json=as_json, code=code)
        if code:
            _exit(code)

    @root.command("resync")
    @click.option(
        "--desk",
        "desk_name",
        default=None,
        help="Resume the runs this desk should own (crashed, released, woken).",
    )
    @forge_option
    @_common
    @json_option
    def resync_cmd(
        desk_name: str | None,
        forge: str | None,
        desks_dir: str,
        cache: str | None,
        workdir: str | None,
        holder: str | None,
        as_json: bool,
    ) -> None:
        """Rebuild every brief's true state from the forge; with --desk, resume its runs."""
        from assay.desks.host.loop import exit_code
        from assay.desks.host.resync import resync
        from assay.errors import Corrupt
        from assay.states import State

        desks = _load_desks(desks_dir) if desk_name else {}
        rows, reports = resync(
            _open(forge, cache),
            desks,
            desk=desk_name,
            workroot=_workroot(workdir),
            holder=holder,
            on_progress=_progress(as_json),
        )
        code = exit_code(reports, nothing=0)
        invalid = [row for row in rows if row.state == State.INVALID]
        if invalid and not code:
            code = Corrupt.code  # every brief is reported; the invalid ones are named
        if as_json:
            print_result(
                {
                    "status": Corrupt.status if invalid else "ok",
                    "code": code,
                    "briefs": [r.to_json() for r in rows],
                    "runs": [r.to_json() for r in reports],
                }
            )
        else:
            table = fitted_table(
                ("brief", "state", "desk", "fence", "waiting for", "last step", "at"),
                [
                    (
                        r.brief,
                        r.state,
                        r.desk,
                        str(r.fence),
                        r.waiting_for,
                        r.last_step,
                        r.last_time,
                    )
                    for r in rows
                ],
                drop=("at", "fence", "waiting for"),
                floors={"last step": 16},
            )
            out.print(table)
            for row in invalid:
                err.print(f"invalid: {row.brief}: {row.problem}", markup=False, highlight=False)
            if reports:
                _print_reports(reports, as_json=False, code=code)
        if code:
            _exit(code)

    @root.command("cancel")
    @click.argument("brief_id", metavar="BRIEF")
    @click.option("--actor", default="", help="Who cancels (recorded with the event).")
    @forge_option
    @json_option
    def cancel_cmd(brief_id: str, actor: str, forge: str | None, as_json: bool) -> None:
        """Cancel a brief: its run stops at its next drain point or wake."""
        from assay.desks.records.events import EventLog

        event = EventLog(_open(forge, None), brief_id).append(
            "cancel", actor=actor or os.environ.get("USER", "")
        )
        if as_json:
            print_result({"status": "ok", "code": 0, "event": event.to_json()})
        else:
            out.print(f"cancelled {brief_id} (event {event.id})")
