"""``assay signal`` and ``assay approve``: deliver events to a run.

With ``--journal DIR`` the event goes to the run's local event store, where the next
``run.signals()`` drain or ``run.wait_for()`` consumes it. The forge mode (``assay
approve BRIEF``) is added by the desk layer; until then the positional argument names
what is approved (default ``approval``) and ``--journal`` is required.
"""

from __future__ import annotations

import getpass
import uuid
from datetime import UTC, datetime
from pathlib import Path

import click

from assay.cli.options import json_option
from assay.console import err, print_json
from assay.errors import UsageError
from assay.runtime import Event, LocalEventStore


def _deliver(journal_dir: Path | None, event: Event, *, as_json: bool) -> None:
    if journal_dir is None:
        raise UsageError("--journal DIR is required: name the run's journal directory")
    LocalEventStore(journal_dir).append(event)
    if as_json:
        print_json(event.to_json())
    else:
        err.print(f"delivered {event.kind} {event.id}", markup=False, highlight=False)


def _journal_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--journal",
        "journal_dir",
        default=None,
        type=click.Path(file_okay=False, path_type=Path),
        help="The run's journal directory (local runs).",
    )(fn)


def _actor() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


@click.command("signal")
@click.argument("text")
@_journal_option
@click.option("--id", "event_id", default=None, help="Event id; the same id is consumed once.")
@json_option
def signal_command(
    journal_dir: Path | None, text: str, event_id: str | None, as_json: bool
) -> None:
    """Send a steering signal TEXT; the run sees it at its next run.signals() drain."""
    event = Event(
        id=event_id or uuid.uuid4().hex,
        kind="signal",
        text=text,
        actor=_actor(),
        at=datetime.now(UTC).isoformat(),
    )
    _deliver(journal_dir, event, as_json=as_json)


@click.command("approve")
@click.argument("target", required=False, metavar="[EVENT]")
@_journal_option
@click.option("--reject", is_flag=True, help="Reject instead of approving.")
@click.option("--id", "event_id", default=None, help="Event id; the same id is consumed once.")
@click.option("--note", default="", help="Text to attach to the decision.")
@json_option
def approve_command(
    target: str | None,
    journal_dir: Path | None,
    reject: bool,
    event_id: str | None,
    note: str,
    as_json: bool,
) -> None:
    """Approve (or --reject) what a run waits for: run.wait_for(EVENT), default "approval"."""
    if journal_dir is None:
        raise UsageError("--journal DIR is required: name the run's journal directory")
    event = Event(
        id=event_id or uuid.uuid4().hex,
        kind="reject" if reject else "approve",
        text=note,
        actor=_actor(),
        at=datetime.now(UTC).isoformat(),
        data={"name": target or "approval"},
    )
    _deliver(journal_dir, event, as_json=as_json)


def register(root: click.Group) -> None:
    """Add ``signal`` and ``approve`` to the root group."""
    root.add_command(signal_command)
    root.add_command(approve_command)
