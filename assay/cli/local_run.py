"""``assay run``, ``assay history`` and ``assay replay``: durable runs with a local journal.

No forge is involved: the journal lives in ``--journal DIR`` and running the same command
again resumes from it. These commands are a thin layer over ``assay.runtime``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import click

from assay.cli.options import forge_option, journal_option, json_option
from assay.console import err, fitted_table, out, print_json
from assay.errors import AssayError, BadInput, Diverged
from assay.journal import Journal, read_journal, secrets_from_env
from assay.journal.redact import Redactor
from assay.runtime import Budget, Replayer, Run, execute_run, load_target

_journal_option = journal_option(
    "The run's journal directory (created on first run; resumed after).", required=True
)


def _parse_input(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadInput(f"--input is not valid JSON: {exc}", flag="--input") from None


def _report_torn(journal: Journal) -> None:
    if journal.torn is not None:
        err.print(
            f"assay: dropped a torn last line at {journal.torn.segment} line {journal.torn.line} "
            "(a crash in the middle of an append)",
            markup=False,
            highlight=False,
        )


@click.command("run")
@click.argument("target", metavar="PATH.py:FUNCTION")
@_journal_option
@click.option("--input", "input_text", default=None, metavar="JSON", help="The run's input (JSON).")
@click.option(
    "--model",
    "model_spec",
    default=None,
    metavar="PATH.py:FACTORY",
    help="A function returning the ModelAdapter for run.model() calls.",
)
@click.option(
    "--secret-env",
    "secret_env",
    multiple=True,
    metavar="NAME",
    help="An environment variable whose value must never reach the journal (repeatable; "
    "also $ASSAY_SECRET_ENV, comma-separated).",
)
@click.option("--max-steps", type=int, default=None, help="Budget: steps.")
@click.option("--max-model-calls", type=int, default=None, help="Budget: model calls.")
@click.option("--max-tokens", type=int, default=None, help="Budget: tokens in and out.")
@click.option("--max-usd", type=float, default=None, help="Budget: dollars.")
@click.option("--max-wall", "max_wall", type=float, default=None, help="Budget: seconds in steps.")
@click.option(
    "--fork-on-divergence",
    is_flag=True,
    help="On a mismatch with the journal, record `diverged` and continue instead of failing.",
)
@click.option("--fence", type=int, default=0, help="Fence of this holder (a takeover if higher).")
@json_option
def run_command(
    target: str,
    journal_dir: Path,
    input_text: str | None,
    model_spec: str | None,
    secret_env: tuple[str, ...],
    max_steps: int | None,
    max_model_calls: int | None,
    max_tokens: int | None,
    max_usd: float | None,
    max_wall: float | None,
    fork_on_divergence: bool,
    fence: int,
    as_json: bool,
) -> None:
    """Run FUNCTION(run, input) from PATH.py durably, journaled in --journal DIR.

    Running the same command again resumes the run where its journal stops. Exit codes:
    0 done, 1 failed, 5 diverged, 6 corrupt, 7 paused (budget), 75 suspended (waiting).
    """
    given = _parse_input(input_text)
    fn = load_target(target)
    model = load_target(model_spec, what="model factory")() if model_spec else None
    secrets = secrets_from_env(secret_env)
    budget = Budget(
        steps=max_steps,
        model_calls=max_model_calls,
        tokens=max_tokens,
        usd=max_usd,
        wall_s=max_wall,
    )
    run = Run.open(
        journal_dir,
        fence=fence,
        model=model,
        budget=budget,
        secrets=secrets,
        on_divergence="fork" if fork_on_divergence else "fail",
    )
    try:
        _report_torn(run.journal)
        result = execute_run(run, fn, given)
    finally:
        run.close()
    payload = Redactor(secrets).value(result.to_json())
    if as_json:
        print_json(payload)
    else:
        line = f"{result.status} (exit {result.code}) after {result.steps} steps"
        if result.message:
            line += f": {payload['message']}"
        err.print(line, markup=False, highlight=False)
        if result.status == "ok":
            out.print(json.dumps(payload["output"], sort_keys=True), markup=False, highlight=False)
    _exit(result.code)


def _exit(code: int) -> None:
    """End with ``code`` after this command printed its own result."""
    if code:
        raise click.exceptions.Exit(code)


def _history_journal(
    journal_dir: Path | None,
    brief: str | None,
    forge: str | None,
    scratch: Path,
    *,
    verb: str = "history",
) -> Journal:
    if (journal_dir is None) == (brief is None):
        raise BadInput(f"{verb}: give exactly one of --journal DIR or --brief ID (with --forge)")
    if journal_dir is not None:
        return read_journal(journal_dir)
    assert brief is not None
    from assay.evidence.anchors import anchored_branch_journal
    from assay.forge import open_forge
    from assay.ids import check_id

    check_id(brief, where="--brief")
    with open_forge(forge) as handle:
        return anchored_branch_journal(handle, brief, scratch)[1]


@click.command("history")
@journal_option("A local run's journal directory.")
@click.option(
    "--brief",
    default=None,
    metavar="ID",
    help="The journal at the brief's checkpoints on --forge, checked against the journal heads "
    "its claim anchored (a rewrite, truncation or missing segment is exit 6).",
)
@forge_option
@json_option
def history_command(
    journal_dir: Path | None, brief: str | None, forge: str | None, as_json: bool
) -> None:
    """Print a run's journal as a timeline (verified first; --json prints JSON lines).

    Each entry, and under it what it means: what the model said (its text and the tool
    calls it asked for), the agent's tool calls with their output, where a process stopped
    and what it had in flight, a request sent upstream again, each approval and evidence
    row. --json prints each entry in full, with ``said``, ``repeated`` and ``resumed``. A
    takeover entry with ``repaid`` says how many model calls a lost machine had made past
    the checkpoint the run resumed from: they were paid again.
    """
    from assay.runtime.timeline import build_timeline

    with tempfile.TemporaryDirectory(prefix="assay-history-") as scratch:
        journal = _history_journal(journal_dir, brief, forge, Path(scratch))
        timeline = build_timeline(journal)  # reads answers from the journal's blobs
    _report_torn(journal)
    if as_json:
        for entry in timeline.entries:
            print_json(entry)
        return
    rows = [(row.seq, row.pos, row.kind, row.what, row.status, row.time) for row in timeline.rows]
    table = fitted_table(
        ("seq", "pos", "kind", "what", "status", "time"), rows, drop=("time", "pos")
    )
    out.print(table)
    out.print(timeline.summary(), markup=False, highlight=False)
    repaid = timeline.facts.repaid_model_calls
    if repaid:
        out.print(
            f"{repaid} model call(s) paid again: a machine was lost before they reached the forge",
            markup=False,
            highlight=False,
        )


@click.command("replay")
@journal_option("A run's journal directory.")
@click.option(
    "--brief",
    default=None,
    metavar="ID",
    help="The journal of the brief's run on --forge (checked as history checks it).",
)
@forge_option
@click.option(
    "--desk",
    "desk_file",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="A cli desk's manifest: check each recorded model call against the matching a "
    "resume under this desk's profile and cli.volatile_output would use, instead of "
    "replaying desk code.",
)
@click.argument("target", metavar="[PATH.py:FUNCTION]", required=False)
@json_option
def replay_command(
    journal_dir: Path | None,
    brief: str | None,
    forge: str | None,
    desk_file: Path | None,
    target: str | None,
    as_json: bool,
) -> None:
    """Replay a run's journal against current code; report the first divergence (exit 5).

    With PATH.py:FUNCTION, the desk code is replayed against the journal. With --desk
    FILE (a cli run), each recorded model call is rebuilt as it was sent and normalised as
    a resume under that desk would normalise it now: a call that would not match names
    where a resumed CLI would diverge.
    """
    if (target is None) == (desk_file is None):
        raise BadInput("replay: give exactly one of PATH.py:FUNCTION or --desk FILE")
    with tempfile.TemporaryDirectory(prefix="assay-replay-") as scratch:
        journal = _history_journal(journal_dir, brief, forge, Path(scratch), verb="replay")
        if not journal.entries:
            where = journal_dir or f"brief {brief}"
            raise BadInput(f"{where}: no journal entries to replay", journal=str(where))
        if desk_file is not None:
            _replay_cli(journal, desk_file, as_json=as_json)
            return
        assert target is not None
        result = Replayer(load_target(target)).replay(journal)
    if as_json:
        print_json(result.to_json())
        if result.failure is not None:
            _exit(result.failure.code)
        return
    if result.failure is not None:
        if isinstance(result.failure, AssayError):
            raise result.failure
        raise Diverged(str(result.failure))
    how = "to its end" if result.finished else "to the end of the journal"
    out.print(
        f"matches: replayed {result.positions} positions {how} ({len(result.history)} entries)",
        markup=False,
        highlight=False,
    )


def _replay_cli(journal: Journal, desk_file: Path, *, as_json: bool) -> None:
    from assay.agentcli.replay import replay_cli
    from assay.desks.kinds.cli import cli_profile, output_masks
    from assay.desks.manifests.manifest import parse_manifest
    from assay.gateway.calls import matching_body

    try:
        text = desk_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{desk_file}: cannot read the desk: {exc.strerror or exc}") from None
    desk = parse_manifest(text, source=str(desk_file), base_dir=desk_file.parent)
    if desk.kind != "cli":
        raise BadInput(f"{desk_file}: kind is {desk.kind!r}: --desk replays a cli desk's run")
    masks, profile = output_masks(desk), cli_profile(desk)
    result = replay_cli(
        journal,
        normal=lambda api, body: matching_body(api, body, masks=masks, extra=profile.normalise),
    )
    if as_json:
        print_json(result.to_json())
        if result.failure is not None:
            _exit(result.failure.code)
        return
    if result.failure is not None:
        raise result.failure
    out.print(
        f"matches: every one of {result.calls} recorded model calls would be matched by a "
        f"resume under {desk_file}",
        markup=False,
        highlight=False,
    )


def register(root: click.Group) -> None:
    """Add ``run``, ``history`` and ``replay`` to the root group."""
    root.add_command(run_command)
    root.add_command(history_command)
    root.add_command(replay_command)
