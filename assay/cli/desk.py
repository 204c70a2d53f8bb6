"""``assay desk run``, ``assay wake``, ``assay resync`` and ``assay cancel``.

A thin layer over ``assay.desks.host.loop`` and ``assay.desks.host.resync``: options, the
table (or ``--json``) and the exit code of DESIGN.md section 8. ``assay desk serve`` and
``assay desk host`` are in ``assay.cli.desk_resident``; what the commands share is in
``assay.cli.desk_common``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from assay.cli.desk_common import DeskPlace, desk_options, exit_with, print_reports, progress
from assay.cli.desk_resident import desk_host, desk_serve
from assay.cli.options import forge_option, json_option, print_result
from assay.console import err, fitted_table, out, printable

BUSY_NOTES_SHOWN = 5  # a fleet's idle desk need not list every brief its peers hold


@click.group("desk")
def desk_group() -> None:
    """Run desks: take briefs from the forge and work on them durably."""


@desk_group.command("run")
@click.argument("name")
@click.option("--once", is_flag=True, help="Run one brief, then exit with its code.")
@click.option("--brief", "brief_id", default=None, metavar="ID", help="Run only this brief.")
@forge_option
@desk_options
@json_option
def desk_run(
    name: str,
    once: bool,
    brief_id: str | None,
    forge: str | None,
    place: DeskPlace,
    as_json: bool,
) -> None:
    """Take the highest-priority claimable brief this desk takes, run it, repeat.

    Exit codes: 0 done, 1 failed, 3 nothing claimable, 4 fenced, 7 paused,
    65 bad input, 69 unavailable, 75 waiting, 77 denied, 78 no sandbox.
    """
    from assay.sandbox.shield import make_undumpable

    make_undumpable()  # before any secret is read: nothing beside us may read our environ
    from assay.desks.host.loop import DeskLoop, default_holder, exit_code, run_slots

    manifest = place.desk(name)
    base_holder = place.holder or default_holder()
    # python desks run with the work tree as working directory: one slot per process.
    slots = 1 if manifest.kind == "python" else int(manifest.concurrency)

    loops: list[DeskLoop] = []

    def make_loop(index: int) -> DeskLoop:
        loop = DeskLoop(
            forge=place.open(forge),
            desk=manifest,
            desks_dir=Path(place.desks_dir),
            workroot=place.workroot / name,
            holder=base_holder if slots == 1 else f"{base_holder}-{index}",
            on_progress=progress(as_json),
        )
        loops.append(loop)
        return loop

    reports = run_slots(make_loop, concurrency=slots, once=once, only=brief_id)
    code = exit_code(reports)
    print_reports(reports, as_json=as_json, code=code)
    if not reports:  # nothing taken: say who holds what this desk would take
        notes = sorted({n for loop in loops for n in loop.busy_notes})
        for note in notes[:BUSY_NOTES_SHOWN]:
            err.print(printable(note), markup=False, highlight=False)
        if len(notes) > BUSY_NOTES_SHOWN:
            more = len(notes) - BUSY_NOTES_SHOWN
            err.print(f"... and {more} more held by other holders (see assay claim list)")
    if code:
        exit_with(code)


desk_group.add_command(desk_serve)
desk_group.add_command(desk_host)


@click.command("wake")
@click.option("--brief", "brief_id", default=None, metavar="ID", help="Wake only this brief.")
@forge_option
@desk_options
@json_option
def wake_cmd(
    brief_id: str | None,
    forge: str | None,
    place: DeskPlace,
    as_json: bool,
) -> None:
    """Resume every waiting run whose event or timer has arrived."""
    from assay.sandbox.shield import make_undumpable

    make_undumpable()  # before any secret is read: nothing beside us may read our environ
    from assay.desks.host.loop import exit_code
    from assay.desks.host.resync import wake

    reports = wake(
        place.open(forge),
        place.desks(),
        workroot=place.workroot,
        only=brief_id,
        holder=place.holder,
        on_progress=progress(as_json),
    )
    code = exit_code(reports, nothing=0)
    print_reports(reports, as_json=as_json, code=code)
    if code:
        exit_with(code)


@click.command("resync")
@click.option(
    "--desk",
    "desk_name",
    default=None,
    help="Resume the runs this desk should own (crashed, released, woken).",
)
@forge_option
@desk_options
@json_option
def resync_cmd(
    desk_name: str | None,
    forge: str | None,
    place: DeskPlace,
    as_json: bool,
) -> None:
    """Rebuild every brief's true state from the forge; with --desk, resume its runs."""
    from assay.desks.host.loop import exit_code
    from assay.desks.host.resync import resync
    from assay.errors import Corrupt
    from assay.states import State

    desks = place.desks() if desk_name else {}
    rows, reports = resync(
        place.open(forge),
        desks,
        desk=desk_name,
        workroot=place.workroot,
        holder=place.holder,
        on_progress=progress(as_json),
    )
    code = exit_code(reports, nothing=0)
    invalid = [row for row in rows if row.state == State.INVALID]
    if invalid and not code:
        code = Corrupt.code  # every brief is reported; the invalid ones are named
    _print_resync(rows, reports, invalid, code=code, as_json=as_json)
    if code:
        exit_with(code)


def _print_resync(
    rows: list[Any], reports: list[Any], invalid: list[Any], *, code: int, as_json: bool
) -> None:
    """The briefs' states (and the runs resumed) as ``--json`` or a table."""
    from assay.errors import Corrupt

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
            print_reports(reports, as_json=False, code=code)


@click.command("cancel")
@click.argument("brief_id", metavar="BRIEF")
@click.option("--actor", default="", help="Who cancels (recorded with the event).")
@forge_option
@json_option
def cancel_cmd(brief_id: str, actor: str, forge: str | None, as_json: bool) -> None:
    """Cancel a brief: its run stops at its next drain point or wake."""
    from assay.desks.records.events import EventLog
    from assay.forge import open_forge

    event = EventLog(open_forge(forge), brief_id).append(
        "cancel", actor=actor or os.environ.get("USER", "")
    )
    if as_json:
        print_result({"status": "ok", "code": 0, "event": event.to_json()})
    else:
        out.print(f"cancelled {brief_id} (event {event.id})")


def register(root: click.Group) -> None:
    """Add this module's commands to the root group."""
    for command in (desk_group, wake_cmd, resync_cmd, cancel_cmd):
        root.add_command(command)
