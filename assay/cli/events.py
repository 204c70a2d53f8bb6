"""``assay signal`` and ``assay approve``: deliver events to a run.

With ``--journal DIR`` the event goes to the run's local event store, where the next
``run.signals()`` drain or ``run.wait_for()`` consumes it; the positional argument of
``approve`` names what is approved (default ``approval``). With ``--forge`` (or
``ASSAY_FORGE``) and no ``--journal``, the first positional is a brief id and the event is
appended to ``refs/assay/events/<brief>`` (``assay.desks.records.events``), where the brief's desk
reads it at its next drain point or ``assay wake`` finds it.
"""

from __future__ import annotations

import getpass
import uuid
from datetime import UTC, datetime
from pathlib import Path

import click

from assay.cli.options import forge_option, journal_option, json_option, print_result
from assay.console import err
from assay.errors import UsageError
from assay.runtime import Event, LocalEventStore


def _deliver(
    journal_dir: Path | None,
    event: Event,
    *,
    as_json: bool,
    forge: str | None = None,
    brief: str | None = None,
) -> None:
    if journal_dir is not None:
        LocalEventStore(journal_dir).append(event)
    elif forge and brief:
        from assay.desks.records.events import deliver

        event = deliver(forge, brief, event)
    else:
        raise UsageError(
            "--journal DIR is required: name the run's journal directory "
            "(or name a BRIEF and its --forge)"
        )
    if as_json:
        print_result(event.to_json())
    else:
        err.print(f"delivered {event.kind} {event.id}", markup=False, highlight=False)


_journal_option = journal_option("The run's journal directory (local runs).")


def _actor() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


@click.command("signal")
@click.argument("words", nargs=-1, required=True, metavar="[BRIEF] TEXT")
@_journal_option
@forge_option
@click.option("--id", "event_id", default=None, help="Event id; the same id is consumed once.")
@json_option
def signal_command(
    words: tuple[str, ...],
    journal_dir: Path | None,
    forge: str | None,
    event_id: str | None,
    as_json: bool,
) -> None:
    """Send a steering signal TEXT; the run sees it at its next run.signals() drain.

    assay signal TEXT --journal DIR (a local run), or assay signal BRIEF TEXT --forge F
    (the brief's run on a forge)."""
    if len(words) == 2 and journal_dir is None:
        brief: str | None = words[0]
        text = words[1]
    elif len(words) == 1:
        brief, text = None, words[0]
    else:
        raise UsageError("signal takes TEXT (with --journal) or BRIEF TEXT (with --forge)")
    event = Event(
        id=event_id or uuid.uuid4().hex,
        kind="signal",
        text=text,
        actor=_actor(),
        at=datetime.now(UTC).isoformat(),
    )
    _deliver(journal_dir, event, as_json=as_json, forge=forge, brief=brief)


@click.command("approve")
@click.argument("target", required=False, metavar="[EVENT | BRIEF]")
@_journal_option
@forge_option
@click.option("--reject", is_flag=True, help="Reject instead of approving.")
@click.option("--id", "event_id", default=None, help="Event id; the same id is consumed once.")
@click.option("--note", default="", help="Text to attach to the decision.")
@json_option
def approve_command(
    target: str | None,
    journal_dir: Path | None,
    forge: str | None,
    reject: bool,
    event_id: str | None,
    note: str,
    as_json: bool,
) -> None:
    """Approve (or --reject) what a run waits for: run.wait_for(EVENT), default "approval".

    assay approve [EVENT] --journal DIR (a local run), or assay approve BRIEF --forge F
    (the brief's run on a forge, waiting for its approval)."""
    on_forge = journal_dir is None and bool(forge)
    event = Event(
        id=event_id or uuid.uuid4().hex,
        kind="reject" if reject else "approve",
        text=note,
        actor=_actor(),
        at=datetime.now(UTC).isoformat(),
        data={"name": "approval" if on_forge else target or "approval"},
    )
    brief = target if on_forge else None
    _deliver(journal_dir, event, as_json=as_json, forge=forge, brief=brief)


def register(root: click.Group) -> None:
    """Add ``signal`` and ``approve`` to the root group."""
    root.add_command(signal_command)
    root.add_command(approve_command)
