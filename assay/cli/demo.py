"""``assay demo``: run the demo and print its summary (or one JSON object)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click
from rich.table import Table

from assay.cli.options import json_option
from assay.console import err, out, print_json
from assay.errors import Failed

CLI_TIMEOUT_S = 300.0  # a real CLI starts as a process per run: slower than the agent desk


def _summary(report: object) -> Table:
    from assay.demo import DemoReport

    assert isinstance(report, DemoReport)
    table = Table(title="What just happened", show_header=False)
    table.add_column("what")
    table.add_column("value")
    rows = [
        (
            "briefs merged",
            f"{report.briefs_merged} of {report.briefs_total} ({', '.join(report.merged)})",
        ),
        ("briefs blocked by the gate", ", ".join(report.blocked) or "none"),
        ("briefs still waiting", str(report.briefs_waiting)),
        ("desk processes started", str(report.desk_processes)),
        ("steps journaled / model calls", f"{report.steps} / {report.model_calls}"),
        ("model answers paid twice", str(report.repaid_model_calls)),
        ("model requests repeated upstream", _repeated(report.repeated_requests)),
        ("double claims", str(report.double_claims)),
        ("crashes injected / recovered", f"{report.crashes_injected} / {report.crashes_recovered}"),
        ("kill to resume (incl. lease wait)", _seconds(report.kill_to_resume_s)),
        ("stuck to resume", _seconds(report.resume_after_stuck_s)),
        ("approval to resume", _seconds(report.approval_to_resume_s)),
        ("forged evidence caught", str(report.forged_evidence_caught)),
        ("pushes the forge refused", str(report.refused_pushes)),
        ("agent CLI", report.cli or "none (the agent desk)"),
        ("agent code sandboxed", "yes" if report.sandboxed else "NO (bubblewrap missing)"),
        ("board", f"{report.board_path} and {report.board_html_path}"),
        ("forge", f"{report.forge_path}"),
        ("seconds", f"{report.seconds:.1f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _repeated(count: int) -> str:
    """The requests sent upstream twice, and why (a provider bills each request)."""
    if not count:
        return "0"
    return f"{count} (the call in flight at the kill, sent again on resume)"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


@click.command("demo")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("assay-demo"),
    show_default=True,
    help="Folder for the forge, the board and the logs (replaced if a previous demo's).",
)
@click.option(
    "--desks", type=click.IntRange(1, 16), default=3, show_default=True, help="Desk processes."
)
@click.option(
    "--briefs", type=click.IntRange(4, 6), default=6, show_default=True, help="Briefs to file."
)
@click.option(
    "--seed", type=int, default=7, show_default=True, help="Chooses the instant of the crash."
)
@click.option("--keep", is_flag=True, help="Keep the desks' work trees and caches (state/).")
@click.option(
    "--cli",
    "cli",
    metavar="NAME",
    default=None,
    help="Tell the story with a real agent CLI (claude-code, codex, gemini-cli, qwen-code, "
    "opencode, aider or mini-swe-agent) in a kind: cli desk.",
)
@json_option
def demo(
    directory: Path,
    desks: int,
    briefs: int,
    seed: int,
    keep: bool,
    cli: str | None,
    as_json: bool,
) -> None:
    """Run Assay's story on an embedded forge: desks, a crash, an approval, a forged claim.

    Starts an embedded forge served over smart HTTP on 127.0.0.1, files the example briefs,
    runs several desk processes, SIGKILLs one mid-run and resumes it, waits for an approval
    that holds no process, lets the gate catch a false "tests pass", merges what is verified
    and renders the board. Exit 0 when every invariant held, 1 otherwise.

    With --cli, each desk runs that agent CLI, unmodified, through Assay's model gateway,
    answered by a scripted upstream on 127.0.0.1 (or ASSAY_MODEL_BASE_URL's endpoint); the
    CLI must be installed (on PATH, or where .ci/install puts it).
    """
    from assay.demo import DemoOptions, Stage
    from assay.demo.display import Display

    display = Display(err, enabled=not as_json)
    try:
        report = Stage(
            DemoOptions(
                directory=directory,
                desks=desks,
                briefs=briefs,
                seed=seed,
                keep=keep,
                cli=cli,
                timeout_s=CLI_TIMEOUT_S if cli else 120.0,
            ),
            display,
        ).run()
    finally:
        display.close()
    if not keep:
        shutil.rmtree(directory / "state", ignore_errors=True)
    if as_json:
        print_json(report.to_json())
        sys.stdout.flush()
        sys.exit(0 if report.ok else 1)
    out.print(_summary(report))
    if not report.ok:
        raise Failed("the demo broke an invariant: " + "; ".join(report.problems or ["see above"]))
    out.print(f"Open {report.board_path} (or {report.board_html_path}) to read the story.")


def register(root: click.Group) -> None:
    """Add ``assay demo``."""
    root.add_command(demo)
