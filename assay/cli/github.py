"""``assay init`` and the ``assay github`` commands (briefs, events, sync, dispatch).

Every command's ``--json`` carries ``rest``: the REST calls this process made (``calls``,
``charged`` against the rate limit, ``not_modified`` 304s, ``writes``, ``retries``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from assay.cli.options import forge_option, json_option, print_result
from assay.console import err, fitted_table, out
from assay.errors import BadInput
from assay.github.init import (
    CLI_DESKS,
    GATE_ENVIRONMENT,
    GATE_SECRET,
    MAIN_RULESET,
    init_repository,
    next_steps,
)


def token_env_option(fn: Any) -> Any:
    """``--token-env NAME``: the environment variable holding the GitHub token."""
    return click.option(
        "--token-env",
        "token_env",
        envvar="ASSAY_GITHUB_TOKEN_ENV",
        default=None,
        metavar="NAME",
        help="Environment variable holding the GitHub token (default: GITHUB_TOKEN).",
    )(fn)


def _open(spec: str | None, token_env: str | None) -> Any:
    from assay.github.forge import open_github_forge

    if not spec or not spec.strip().startswith("github:"):
        raise BadInput("--forge must be github:OWNER/REPO for `assay github` commands")
    return open_github_forge(spec, token_env=token_env)


def _emit(payload: dict[str, Any]) -> None:
    print_result({"status": "ok", "code": 0, **payload})


@click.command("init")
@click.argument(
    "directory",
    required=False,
    default=".",
    type=click.Path(file_okay=False, path_type=Path),
)
@click.option("--force", is_flag=True, help="Overwrite files that differ from the starter set.")
@click.option(
    "--cli",
    "cli",
    type=click.Choice(list(CLI_DESKS)),
    default=None,
    help="Also write a desk running this agent CLI (desks/<name>.yaml, kind: cli).",
)
@forge_option
@json_option
def init_command(
    directory: Path, force: bool, cli: str | None, forge: str | None, as_json: bool
) -> None:
    """Write desks/, briefs/, sweepers/, board_templates/ and .github/workflows/ into DIRECTORY.

    Refuses (exit 65, naming the file, writing nothing) when a file already exists with other
    content, unless --force is given. Files already identical are left alone. With --cli, the
    desk workflow installs that CLI and hands it the model key's repository secret through
    the model gateway only (docs/agent-clis.md). Ends with the next step for --forge: on
    GitHub (github:OWNER/REPO, or none), the environment (main only) holding the gate's
    secret, and main's ruleset; on an embedded forge (a path or URL), the commands that
    file, run, gate and show a brief.
    """
    steps = next_steps(directory, forge)  # BadInput before anything is written
    result = init_repository(directory, force=force, cli=cli)
    if as_json:
        payload: dict[str, Any] = {
            "target": str(directory),
            "files": result.rows(),
            "next": steps.to_json(),
        }
        if steps.forge == "github":
            payload.update(
                secrets=[GATE_SECRET],
                environment={"name": GATE_ENVIRONMENT, "deployment_branches": ["main"]},
                ruleset=MAIN_RULESET,
            )
        _emit(payload)
        return
    rows = [(str(row["path"]), str(row["action"])) for row in result.rows()]
    out.print(fitted_table(("file", "action"), rows))
    out.print(
        f"{len(result.written)} written, {len(result.overwritten)} overwritten, "
        f"{len(result.unchanged)} unchanged in {directory}"
    )
    for line in steps.lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)


@click.group("github")
def github_group() -> None:
    """GitHub's API layer: issue briefs, /assay comments, the mirror, dispatches."""


@github_group.command("briefs")
@forge_option
@token_env_option
@json_option
def briefs_command(forge: str | None, token_env: str | None, as_json: bool) -> None:
    """List the briefs in open issues labelled `assay` (one conditional REST call)."""
    from assay.github.issues import issue_briefs

    with _open(forge, token_env) as opened:
        found = issue_briefs(opened)
    rows = [
        {
            "brief": key,
            "issue": value.number,
            "title": value.brief.title,
            "url": value.url,
            # The rows of the text a writer accepted; "changed": the issue says otherwise now.
            "text": "accepted" if value.current else "changed",
            "labels": list(value.brief.labels),
            "needs_approval": value.brief.needs_approval,
            "verify": [{"id": row.id, "run": row.run} for row in value.brief.verify],
        }
        for key, value in sorted(found.briefs.items())
    ]
    problems = [error.message for error in found.errors]
    if as_json:
        _emit({"briefs": rows, "errors": problems})
        return
    cells = [(str(row["brief"]), f"#{row['issue']}", str(row["title"])) for row in rows]
    out.print(fitted_table(("brief", "issue", "title"), cells))
    for problem in problems:
        err.print(f"assay: bad_input: {problem}", markup=False, highlight=False)


@github_group.command("events")
@click.option(
    "--reviews/--no-reviews",
    default=True,
    help="Also read pull request reviews: of waiting briefs, and of every brief's pull "
    "request that changed since the last run (one conditional call each).",
)
@click.option(
    "--dispatch",
    "dispatch_workflow",
    default=None,
    metavar="WORKFLOW",
    help="workflow_dispatch this workflow (e.g. assay-desk.yml) for each woken brief.",
)
@click.option(
    "--dispatch-gate",
    "gate_workflow",
    default=None,
    metavar="WORKFLOW",
    help="workflow_dispatch the gate (e.g. assay-gate.yml) again for each ready review an "
    "approval or rejection answered, so its check run shows the verdict the answer moved.",
)
@forge_option
@token_env_option
@json_option
def events_command(
    reviews: bool,
    dispatch_workflow: str | None,
    gate_workflow: str | None,
    forge: str | None,
    token_env: str | None,
    as_json: bool,
) -> None:
    """Turn /assay approve|reject|steer|cancel comments and reviews into events.

    Only authors with write permission (checked through the API) are honoured; others are
    reported. A comment already consumed (a webhook retry) is skipped.
    """
    from assay.claims import ClaimStore
    from assay.github.events import collect_events
    from assay.github.sync import ANSWERS, dispatch_answered

    with _open(forge, token_env) as opened:
        claims = {record.brief: record for record in ClaimStore(opened).list()}
        waiting = sorted(b for b, r in claims.items() if r.state == "waiting")
        report = collect_events(opened, reviews_for=waiting if reviews else (), reviews=reviews)
        woken = sorted({e["brief"] for e in report.appended if e["brief"] in waiting})
        if dispatch_workflow:
            for brief in woken:
                opened.api.dispatch(
                    dispatch_workflow,
                    inputs={"desk": claims[brief].desk, "brief": brief},
                )
        answered = [e["brief"] for e in report.appended if e["kind"] in ANSWERS]
        regated = (
            dispatch_answered(opened, answered, workflow=gate_workflow) if gate_workflow else []
        )
    for item in report.ignored:
        err.print(
            f"assay: denied: ignored {item.source} on {item.brief}: {item.reason}",
            markup=False,
            highlight=False,
        )
    if as_json:
        _emit({**report.to_json(), "woken": woken, "gated": regated})
        return
    cells = [
        (str(event["brief"]), str(event["kind"]), str(event["actor"]), str(event["id"]))
        for event in report.appended
    ]
    out.print(fitted_table(("brief", "event", "actor", "id"), cells))
    for brief in regated:
        out.print(f"{brief}: the gate dispatched again for the answered review", markup=False)


@github_group.command("sync")
@click.option("--brief", "briefs", multiple=True, help="Only this brief (repeatable).")
@click.option(
    "--only",
    "only",
    type=click.Choice(["claims", "reviews", "evidence"]),
    multiple=True,
    help="Only these parts (the gate syncs evidence alone).",
)
@click.option(
    "--dispatch-gate",
    "gate_workflow",
    default=None,
    metavar="WORKFLOW",
    help="workflow_dispatch this gate workflow once per ready review head.",
)
@forge_option
@token_env_option
@json_option
def sync_command(
    briefs: tuple[str, ...],
    only: tuple[str, ...],
    gate_workflow: str | None,
    forge: str | None,
    token_env: str | None,
    as_json: bool,
) -> None:
    """Mirror claims, reviews and evidence from git onto GitHub (changes only)."""
    from assay.github.sync import PARTS, sync

    with _open(forge, token_env) as opened:
        report = sync(opened, briefs or None, parts=only or PARTS, gate_workflow=gate_workflow)
    if as_json:
        _emit(report.to_json())
        return
    cells = [
        (brief, " ".join(actions) or "-", report.problems.get(brief, ""))
        for brief, actions in sorted(report.actions.items())
    ]
    out.print(fitted_table(("brief", "actions", "problem"), cells))


@github_group.command("merge")
@click.argument("brief")
@forge_option
@token_env_option
@json_option
def merge_command(brief: str, forge: str | None, token_env: str | None, as_json: bool) -> None:
    """Merge BRIEF's pull request if every row is verified passing at its head.

    Exit 1 naming the blocking rows otherwise. GitHub merges at exactly the judged head.
    """
    from assay.github.sync import merge_on_github
    from assay.ids import check_id

    check_id(brief, where="BRIEF")
    with _open(forge, token_env) as opened:
        head, actions = merge_on_github(opened, brief)
    if as_json:
        _emit({"brief": brief, "head_sha": head, "actions": actions})
        return
    out.print(f"merged {brief} at {head[:12]}: {' '.join(actions) or 'already merged'}")


@github_group.command("dispatch")
@click.argument("workflow")
@click.option("--ref", default="main", show_default=True, help="Branch the workflow runs on.")
@click.option("--input", "inputs", multiple=True, metavar="KEY=VALUE", help="A workflow input.")
@forge_option
@token_env_option
@json_option
def dispatch_command(
    workflow: str,
    ref: str,
    inputs: tuple[str, ...],
    forge: str | None,
    token_env: str | None,
    as_json: bool,
) -> None:
    """Start WORKFLOW with workflow_dispatch (runs made with GITHUB_TOKEN start no others)."""
    values: dict[str, str] = {}
    for item in inputs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"--input {item!r}: expected KEY=VALUE")
        values[key] = value
    with _open(forge, token_env) as opened:
        opened.api.dispatch(workflow, ref=ref, inputs=values)
    if as_json:
        _emit({"workflow": workflow, "ref": ref, "inputs": values})
        return
    out.print(f"dispatched {workflow} on {ref}")


def register(root: click.Group) -> None:
    """Add ``assay init`` and the ``assay github`` group to the root group."""
    root.add_command(init_command)
    root.add_command(github_group)
