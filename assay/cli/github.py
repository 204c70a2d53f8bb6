"""``assay init``: write the desks, briefs, sweepers, board templates and workflows."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from assay.cli.options import json_option
from assay.console import out, print_json
from assay.github.init import init_repository
from assay.github.rest import process_stats


@click.command("init")
@click.argument(
    "directory",
    required=False,
    default=".",
    type=click.Path(file_okay=False, path_type=Path),
)
@click.option("--force", is_flag=True, help="Overwrite files that differ from the starter set.")
@json_option
def init_command(directory: Path, force: bool, as_json: bool) -> None:
    """Write desks/, briefs/, sweepers/, board_templates/ and .github/workflows/ into DIRECTORY.

    Refuses (exit 65, naming the file, writing nothing) when a file already exists with other
    content, unless --force is given. Files already identical are left alone.
    """
    result = init_repository(directory, force=force)
    if as_json:
        print_json(
            {
                "status": "ok",
                "code": 0,
                "target": str(directory),
                "files": result.rows(),
                "rest": process_stats().to_json(),
            }
        )
        return
    table = Table("file", "action")
    for row in result.rows():
        table.add_row(row["path"], row["action"])
    out.print(table)
    out.print(
        f"{len(result.written)} written, {len(result.overwritten)} overwritten, "
        f"{len(result.unchanged)} unchanged in {directory}"
    )


def register(root: click.Group) -> None:
    """Add ``assay init`` to the root group."""
    root.add_command(init_command)
