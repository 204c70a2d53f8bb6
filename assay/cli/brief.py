"""``assay brief``: write a brief from a template, file it on the forge, list and show briefs.

Thin click layer over ``assay.briefs`` (the format) and ``assay.briefs.store`` (briefs on a
forge's main). Briefs are read from ``--dir DIR`` when given, else from the forge
(``--forge`` / ``$ASSAY_FORGE``), else from ``./briefs``.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import click
from rich.text import Text

from assay.briefs import Brief, FrontMatter, by_priority, parse_brief, render_brief
from assay.briefs.tree import read_brief_dir, split_briefs
from assay.cli.options import forge_option, json_option, print_result
from assay.console import err, fitted_table, out, printable
from assay.errors import BadInput, UsageError
from assay.ids import check_id

TEMPLATE_BODY = """\
What should change, and why. Say what done looks like: the verify rows above are the
acceptance checks an independent gate re-runs on the review's head commit.
"""


def _files(forge: str | None, directory: str | None) -> dict[str, bytes]:
    """The brief files to list: a directory's, or those on the forge's main."""
    if directory is not None or forge is None:
        return read_brief_dir(Path(directory or "briefs"))
    from assay.briefs.store import brief_files
    from assay.forge import MAIN, open_forge

    with open_forge(forge) as handle:
        head = handle.refresh([MAIN]).get(MAIN)
        return brief_files(handle, head) if head else {}


@click.group("brief")
def brief_group() -> None:
    """Author, file and inspect briefs (briefs/<id>.md: YAML front matter + Markdown)."""


@brief_group.command("new")
@click.argument("brief_id", metavar="ID")
@click.option("--title", default=None, help="The brief's title (default: from the id).")
@click.option("--dir", "directory", default="briefs", show_default=True, help="Where to write.")
@click.option("--desk", default=None, help="The desk that should take it.")
@click.option("--label", "labels", multiple=True, help="A label (repeatable).")
@click.option("--priority", type=int, default=0, show_default=True, help="Higher goes first.")
@json_option
def new_command(
    brief_id: str,
    title: str | None,
    directory: str,
    desk: str | None,
    labels: tuple[str, ...],
    priority: int,
    as_json: bool,
) -> None:
    """Write a valid brief template to DIR/ID.md (never overwrites)."""
    check_id(brief_id, where="ID")
    path = Path(directory) / f"{brief_id}.md"
    if path.exists():
        raise BadInput(f"{path}: already exists; edit it instead")
    front = FrontMatter.model_validate(
        {
            "id": brief_id,
            "title": title or brief_id.replace("-", " ").replace("_", " ").capitalize(),
            "desk": desk,
            "labels": list(labels),
            "priority": priority,
            "verify": [{"id": "tests", "run": "python -m pytest -q"}],
            "budget": {"steps": 50, "model_calls": 25},
        }
    )
    text = render_brief(front, body=TEMPLATE_BODY)
    parse_brief(text, source=str(path))  # the template must itself be a valid brief
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as handle:
        handle.write(text)
    if as_json:
        print_result({"status": "ok", "code": 0, "id": brief_id, "path": str(path)})
    else:
        out.print(f"wrote {path}", markup=False, highlight=False)


@brief_group.command("add")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@forge_option
@click.option("--author", default="assay", show_default=True, help="Commit author name.")
@click.option("--replace", is_flag=True, help="Replace a brief of that id with other content.")
@json_option
def add_command(file: Path, forge: str | None, author: str, replace: bool, as_json: bool) -> None:
    """Validate FILE and commit it to the forge's main as briefs/<id>.md (CAS push)."""
    if forge is None:
        raise UsageError("brief add needs --forge (or $ASSAY_FORGE)")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise BadInput(f"{file}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{file}: not UTF-8 text ({exc.reason})") from None
    brief = parse_brief(text, source=str(file))
    from assay.briefs.store import add_brief

    result = add_brief(forge, brief, data, author=author, replace=replace)
    if as_json:
        print_result({"status": "ok", "code": 0, **result})
    else:
        verb = (
            "unchanged" if result["unchanged"] else ("replaced" if result["replaced"] else "added")
        )
        out.print(f"{verb} {result['path']} on main at {result['commit'][:12]}", markup=False)


def _row(brief: Brief) -> dict[str, object]:
    return {
        "id": brief.id,
        "title": brief.title,
        "desk": brief.desk,
        "labels": brief.labels,
        "priority": brief.priority,
        "depends_on": brief.depends_on,
        "verify": [row.id for row in brief.verify],
        "objective": brief.objective is not None,
        "source": brief.source,
    }


@brief_group.command("list")
@forge_option
@click.option("--dir", "directory", default=None, help="Read briefs from this directory.")
@json_option
def list_command(forge: str | None, directory: str | None, as_json: bool) -> None:
    """List briefs, highest priority first.

    A brief file that does not parse is listed as invalid with its reason (exit 65 after
    the list); it never hides the others.
    """
    good, bad = split_briefs(_files(forge, directory))
    briefs = by_priority(good.values())
    invalid = [{"source": path, "message": error.message} for path, error in bad.items()]
    if as_json:
        code = BadInput.code if invalid else 0
        status = BadInput.status if invalid else "ok"
        print_result(
            {
                "status": status,
                "code": code,
                "briefs": [_row(b) for b in briefs],
                "invalid": invalid,
                **({"message": "; ".join(i["message"] for i in invalid)} if invalid else {}),
            }
        )
        if invalid:
            raise click.exceptions.Exit(BadInput.code)
        return
    rows = [
        (
            brief.id,
            str(brief.priority),
            brief.desk or ", ".join(brief.labels),
            ", ".join(brief.depends_on),
            ", ".join(row.id for row in brief.verify),
            brief.title,
        )
        for brief in briefs
    ]
    headers = ("id", "priority", "desk/labels", "depends on", "verify", "title")
    out.print(fitted_table(headers, rows, drop=("verify", "depends on", "priority")))
    for item in invalid:
        err.print(Text(printable(f"invalid: {item['message']}")))
    if invalid:
        raise click.exceptions.Exit(BadInput.code)


@brief_group.command("show")
@click.argument("brief_id", metavar="ID")
@forge_option
@click.option("--dir", "directory", default=None, help="Read briefs from this directory.")
@json_option
def show_command(brief_id: str, forge: str | None, directory: str | None, as_json: bool) -> None:
    """Show one brief: its fields and body.

    Another brief that does not parse does not stop this one; asking for the bad one is
    exit 65 naming its file and field.
    """
    check_id(brief_id, where="ID")
    briefs, bad = split_briefs(_files(forge, directory))
    if brief_id not in briefs:
        for path, error in bad.items():
            if PurePosixPath(path).stem == brief_id:
                raise error
        raise BadInput(f"no brief {brief_id!r} (known: {', '.join(sorted(briefs)) or 'none'})")
    brief = briefs[brief_id]
    if as_json:
        print_result({"status": "ok", "code": 0, "brief": brief.to_json()})
        return
    # The brief's own text, its control and bidi characters shown as escapes.
    out.print(printable(render_brief(brief), keep="\n\t"), markup=False, highlight=False, end="")


def register(root: click.Group) -> None:
    """Add ``assay brief`` to the root group."""
    root.add_command(brief_group)
