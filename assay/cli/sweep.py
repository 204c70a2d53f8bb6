"""``assay sweep``: run the sweeper policies once; ``install-hook`` and ``wake`` for the waker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from assay.cli.options import forge_option, json_option, print_result
from assay.console import fitted_table, out


def _policies(directory: str | None) -> list[Any]:
    from assay.sweep.wake import policies_from

    return policies_from(directory)


def _dispatcher(forge: Any) -> Any:
    from assay.sweep.wake import local_dispatcher

    return local_dispatcher(forge)


def _print(report: Any, as_json: bool) -> None:
    data = report.to_json()
    if as_json:
        print_result(data)
        return
    verb = "would do" if report.dry_run else "did"
    title = (
        f"sweep {data['sweep']} by {data['by']} at {data['at']}: {len(report.actions)} "
        f"action(s) {verb}, {report.claims} claim(s), {report.round_trips} round trip(s), "
        f"{report.seconds:.2f}s"
    )
    if not report.actions:
        out.print(title, markup=False, highlight=False)
        return
    rows = [
        (
            action["sweeper"],
            action["action"],
            action.get("ref") or action["brief"],
            action["outcome"],
            action["note"],
        )
        for action in data["actions"]
    ]
    headers = ("sweeper", "action", "brief / ref", "outcome", "note")
    table = fitted_table(headers, rows, drop=("sweeper",), title=title, title_justify="left")
    out.print(table)


@click.group("sweep", invoke_without_command=True)
@click.option("--dry-run", is_flag=True, help="Plan and print; change nothing on the forge.")
@click.option(
    "--sweepers",
    "sweepers",
    default=None,
    metavar="DIR",
    help="Folder of sweeper policies (default: ./sweepers, else one of each kind).",
)
@click.option("--fix", is_flag=True, help="Delete the orphans found instead of reporting them.")
@click.option("--by", default=None, help="Who the sweep says it is on the forge.")
@forge_option
@json_option
@click.pass_context
def sweep(
    ctx: click.Context,
    dry_run: bool,
    sweepers: str | None,
    fix: bool,
    by: str | None,
    forge: str | None,
    as_json: bool,
) -> None:
    """Run every sweeper once: stuck claims, waker, orphans, budgets, honest status.

    Reads all claims in one fetch, acts idempotently (a second sweep changes nothing) and
    records each action on the forge (refs/assay/sweeps/log, refs/assay/status/<brief>).
    """
    if ctx.invoked_subcommand is not None:
        return
    from assay.forge import open_forge
    from assay.sweep.engine import run_sweep

    policies = _policies(sweepers)
    the_forge = open_forge(forge)
    report = run_sweep(
        the_forge,
        policies,
        dry_run=dry_run,
        fix=fix,
        by=by,
        dispatcher=_dispatcher(the_forge),
    )
    _print(report, as_json)


@sweep.command("wake")
@click.option("--brief", "brief", required=True, help="The brief whose waiting run to wake.")
@click.option("--sweepers", "sweepers", default=None, metavar="DIR", help="Policy folder.")
@forge_option
@json_option
def wake(brief: str, sweepers: str | None, forge: str | None, as_json: bool) -> None:
    """Run the waker for one brief now (what the forge's receive hook calls on a push)."""
    from assay.sweep.wake import wake_one

    _print(wake_one(brief, forge_spec=forge, sweepers=sweepers), as_json)


@sweep.command("install-hook")
@click.argument("repository", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--forge-url",
    default=None,
    help="The forge URL woken desks use (default: the repository's own path).",
)
@click.option(
    "--workdir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the waker runs: the folder with sweepers/ and desks/ (default: here).",
)
@click.option(
    "--host-socket",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Socket of an `assay desk host`: wakes go there first (no process started).",
)
@json_option
def install_hook(
    repository: Path,
    forge_url: str | None,
    workdir: Path | None,
    host_socket: Path | None,
    as_json: bool,
) -> None:
    """Install the embedded forge's post-receive hook: a push to an events ref wakes the run."""
    from assay.sweep.hook import install_wake_hook

    path = install_wake_hook(
        repository, forge_url=forge_url, workdir=workdir, host_socket=host_socket
    )
    if as_json:
        print_result({"status": "ok", "code": 0, "hook": str(path)})
    else:
        out.print(f"installed {path}", markup=False, highlight=False)


def register(root: click.Group) -> None:
    """Add ``assay sweep`` (with ``wake`` and ``install-hook``) to the root group."""
    root.add_command(sweep)
