"""What the desk commands share: the desk options, the forge and desks they open, the runs table."""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from assay.cli.options import print_result
from assay.console import err, fitted_table, out, printable

DESKS_HELP = "Directory of desk manifests (default: ./desks)."


def exit_with(code: int) -> None:
    """Exit with ``code`` after printing our own result.

    (``click.exceptions.Exit`` is turned into a return value by click when the root runs
    with ``standalone_mode=False``, so the code would be lost.)
    """
    sys.stdout.flush()
    sys.exit(code)


@dataclass(frozen=True)
class DeskPlace:
    """Where a desk command works: ``--desks``, ``--cache``, ``--workdir``, ``--holder``."""

    desks_dir: str
    cache: str | None
    workdir: str | None
    holder: str | None

    @property
    def cache_dir(self) -> Path | None:
        return Path(self.cache) if self.cache else None

    @property
    def workroot(self) -> Path:
        if self.workdir:
            return Path(self.workdir)
        state = os.environ.get("ASSAY_STATE")
        return (Path(state) if state else Path.home() / ".cache" / "assay") / "work"

    def open(self, forge_spec: str | None) -> Any:
        from assay.forge import open_forge

        return open_forge(forge_spec, cache_dir=self.cache_dir)

    def desks(self) -> dict[str, Any]:
        """The desks whose manifests parse; each bad one is named on stderr and left out."""
        return self._read()[0]

    def desk(self, name: str) -> Any:
        """The manifest of desk ``name``: a bad ``<name>.yaml`` is raised for itself (65,
        naming its file and field), another desk's bad manifest does not matter."""
        from assay.errors import BadInput

        desks, bad = self._read()
        if name in desks:
            return desks[name]
        for source, error in bad.items():
            if Path(source).stem == name:
                raise error
        have = ", ".join(sorted(desks)) or "none"
        broken = f"; not parsed: {', '.join(sorted(bad))}" if bad else ""
        raise BadInput(f"{self.desks_dir}: no desk named {name!r} (have: {have}{broken})")

    @functools.cache  # noqa: B019 - a DeskPlace lives for one command
    def _read(self) -> tuple[dict[str, Any], dict[str, Any]]:
        from assay.desks.manifests.manifest import split_desks

        desks, bad = split_desks(Path(self.desks_dir))
        for error in bad.values():
            err.print(
                printable(f"assay: bad_input: {error.message} (that desk is left out)"),
                markup=False,
                highlight=False,
            )
        return desks, bad


def progress(as_json: bool) -> Any:
    def show(line: str) -> None:
        if not as_json:
            err.print(printable(line), markup=False, highlight=False)

    return show


def print_reports(reports: list[Any], *, as_json: bool, code: int) -> None:
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
            line = printable(f"{r.brief}: {r.status}: {r.message}", keep="\n")
            err.print(line, markup=False, highlight=False)


# Applied in this order, so ``--help`` lists them last to first, as it always has.
DESK_OPTIONS = (
    click.option("--desks", "desks_dir", default="desks", metavar="DIR", help=DESKS_HELP),
    click.option(
        "--cache",
        envvar="ASSAY_CACHE",
        default=None,
        metavar="DIR",
        help="Local cache repository for the forge (default: per forge URL).",
    ),
    click.option(
        "--workdir",
        envvar="ASSAY_WORKDIR",
        default=None,
        metavar="DIR",
        help="Where briefs are checked out (default: $ASSAY_STATE/work).",
    ),
    click.option(
        "--holder",
        envvar="ASSAY_HOLDER",
        default=None,
        metavar="TOKEN",
        help="Holder token for claims (default: host, pid and a random suffix).",
    ),
)


def desk_options(fn: Any) -> Any:
    """``--desks``, ``--cache``, ``--workdir`` and ``--holder``, given to the command as one
    ``place: DeskPlace``."""

    @functools.wraps(fn)
    def with_place(
        *args: Any,
        desks_dir: str,
        cache: str | None,
        workdir: str | None,
        holder: str | None,
        **kwargs: Any,
    ) -> Any:
        return fn(*args, place=DeskPlace(desks_dir, cache, workdir, holder), **kwargs)

    for option in DESK_OPTIONS:
        with_place = option(with_place)
    return with_place
