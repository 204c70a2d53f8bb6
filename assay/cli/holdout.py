"""``assay holdout add`` and ``list``: acceptance rows the desk never sees.

A row's command and files are sealed on this machine to the gate's holdout public key (the
forge's settings record, or ``$ASSAY_GATE_HOLDOUT_KEY`` / ``--public-key`` where refs are
not protected, as on GitHub) and stored on ``refs/assay/holdout/<brief>``; only the gate
opens them (``assay.evidence.holdout``, docs/evidence.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

import assay.refs as refs
from assay.cli.options import forge_option, json_option, print_result
from assay.console import err, out
from assay.errors import BadInput
from assay.evidence.spec import DEFAULT_ROW_TIMEOUT_S
from assay.ids import check_id

if TYPE_CHECKING:
    from assay.evidence.holdout import HoldoutPublicKey
    from assay.forge.base import Forge

HOLDOUT_KEY_ENV = "ASSAY_GATE_HOLDOUT_KEY"
MAX_FILE_BYTES = 512 * 1024


@click.group("holdout")
def holdout_group() -> None:
    """Acceptance rows sealed to the gate: the desk can fetch them but never read them."""


def _public_key(forge: Forge, given: str | None) -> HoldoutPublicKey:
    from assay.evidence.holdout import HoldoutPublicKey
    from assay.forge.settings import read_settings

    text = given or os.environ.get(HOLDOUT_KEY_ENV, "")
    if text:
        source = "--public-key" if given else HOLDOUT_KEY_ENV
        return HoldoutPublicKey.parse(text, source=source)
    if not forge.protects_custom_refs:
        raise BadInput(
            f"{forge.display_url}: its refs are writable by any job, so its settings record "
            f"cannot say which key holdout rows are sealed to: pass --public-key or set "
            f"{HOLDOUT_KEY_ENV} (`assay forge gate-key --json` prints it as holdout_public_key)"
        )
    recorded = read_settings(forge).holdout_public_key
    if not recorded:
        raise BadInput(
            f"{forge.display_url}: the forge records no holdout key: record the gate's keys "
            "with `assay forge gate-key PATH` (or pass --public-key)"
        )
    return HoldoutPublicKey.parse(recorded, source=f"{refs.CONFIG}: holdout_public_key")


def _read_file(path: str) -> tuple[str, bytes]:
    """``path`` relative to the current directory (its place in the gate's tree), read."""
    where = Path(path)
    relative = os.path.relpath(where.resolve(), Path.cwd().resolve())
    if where.is_absolute() or relative.startswith(".."):
        raise BadInput(f"--file {path!r}: name a file under the current directory")
    if where.is_symlink() or not where.is_file():
        raise BadInput(f"--file {path!r}: not a regular file")
    if where.stat().st_size > MAX_FILE_BYTES:
        raise BadInput(f"--file {path!r}: over {MAX_FILE_BYTES} bytes")
    return relative.replace(os.sep, "/"), where.read_bytes()


def _require_named(forge: Forge, brief: str, row: str) -> None:
    """Where any job may delete the holdout ref (GitHub), a row is sealed only once the
    brief names it (``holdout: [ROW]``, in a text a desk cannot change: main's brief file,
    or the issue's state a writer accepted): the gate then refuses while it is missing, so
    a desk job deleting the ref before the first verify cannot pass the brief without it."""
    if forge.protects_custom_refs:
        return
    from assay.evidence.source import fetch_view, load_brief

    named = load_brief(forge, fetch_view(forge, brief).main, brief).holdout
    if row not in named:
        raise BadInput(
            f"{forge.display_url}: brief {brief!r} does not name holdout row {row!r}: any job "
            f"may delete {refs.holdout_ref(brief)} there, so add `holdout: [{row}]` to the "
            "brief first (main's brief file, or the issue's front matter, accepted by a "
            "writer), then seal the row"
        )


@holdout_group.command("add")
@click.argument("brief")
@click.option("--id", "row", required=True, help="The row's id (shown on reviews and boards).")
@click.option("--run", "command", required=True, help="The row's command, as a verify row's.")
@click.option(
    "--file",
    "files",
    multiple=True,
    metavar="PATH",
    help="A file the row needs, placed at PATH (relative to here) in the gate's tree.",
)
@click.option(
    "--timeout",
    "timeout_s",
    default=DEFAULT_ROW_TIMEOUT_S,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True, max=24 * 3600),
    help="Seconds the row may run.",
)
@click.option("--public-key", default=None, help="The gate's holdout key (x25519:…).")
@forge_option
@json_option
def add_command(
    brief: str,
    row: str,
    command: str,
    files: tuple[str, ...],
    timeout_s: float,
    public_key: str | None,
    forge: str | None,
    as_json: bool,
) -> None:
    """Seal a holdout row (its command and files) to the gate and store it for BRIEF.

    A row of the same id is replaced (evidence for the old one is then stale). Nothing of
    the row but its id is readable on the forge; the review and the board show its verdict.
    """
    from assay.evidence.holdout import add_row
    from assay.forge import open_forge
    from assay.plumbing import Identity

    check_id(brief, where="BRIEF")
    contents = dict(_read_file(path) for path in files)
    with open_forge(forge) as handle:
        public = _public_key(handle, public_key)
        _require_named(handle, brief, row)
        rows = add_row(
            handle,
            brief,
            row,
            command=command,
            files=contents,
            public=public,
            author=Identity(name="assay-holdout", email="author@assay.invalid"),
            timeout_s=timeout_s,
        )
    if as_json:
        print_result({"status": "ok", "code": 0, "brief": brief, "rows": [r.id for r in rows]})
    else:
        out.print(f"{brief}: holdout row {row} sealed ({len(rows)} in all)", markup=False)
        err.print(
            f"assay: name it in the brief's front matter (holdout: [{row}]) so the gate "
            "refuses while it is missing (required where custom refs are unprotected: GitHub)",
            markup=False,
            highlight=False,
        )


@holdout_group.command("list")
@click.argument("brief")
@forge_option
@json_option
def list_command(brief: str, forge: str | None, as_json: bool) -> None:
    """The ids of BRIEF's holdout rows (never their commands or files)."""
    from assay.evidence.holdout import read_rows
    from assay.forge import open_forge

    check_id(brief, where="BRIEF")
    with open_forge(forge) as handle:
        rows = read_rows(handle, brief)
    if as_json:
        print_result({"status": "ok", "code": 0, "brief": brief, "rows": [r.id for r in rows]})
    else:
        for row in rows:
            out.print(row.id, markup=False, highlight=False)


def register(root: click.Group) -> None:
    """Add ``holdout`` to the root group."""
    root.add_command(holdout_group)
