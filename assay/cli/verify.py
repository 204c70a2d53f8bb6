"""``assay verify`` and ``assay merge``: the evidence gate on the command line.

A thin layer over ``assay.evidence.gate``: ``verify`` exits 0 when every row passes at the
head in the declared environment and 1 otherwise; ``merge`` exits 0 once main holds the
review's head and 1 naming each missing, failing or stale row when the rule refuses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.text import Text

from assay.cli.options import forge_option, json_option, print_result
from assay.console import err, fitted_table, out, printable
from assay.errors import AssayError, UsageError
from assay.evidence.gate import MergeRefused, VerifyReport, merge, verify
from assay.evidence.records import EvidenceRecord
from assay.evidence.rule import describe
from assay.evidence.spec import RowSpec
from assay.evidence.table import render_rich
from assay.forge import open_forge
from assay.ids import check_id

if TYPE_CHECKING:
    from rich.table import Table

    from assay.evidence.batch import BatchResult


def _exit_failed() -> None:
    """Exit 1 after the result (table or JSON) was printed."""
    raise click.exceptions.Exit(1)


TAIL_SHOWN = 10


def _print_report(report: VerifyReport) -> None:
    out.print(render_rich(report.decision))
    for record in report.ran:
        if record.passed or not record.output_tail:
            continue
        out.print(Text(f"{record.row}: last lines of its output", style="bold"))
        for line in record.output_tail.splitlines()[-TAIL_SHOWN:]:
            # The branch's own output: its escapes are shown, not sent to the terminal.
            out.print(Text(printable(f"  {line}"), style="dim"))
    if report.pins is not None and report.pins.pinned:
        out.print(Text(f"pinned from main at {report.pins.base[:12]}:", style="bold"))
        out.print(Text("  " + ", ".join(report.pins.pinned), style="dim"))
    if report.pins is not None and report.pins.unpinned:
        out.print(Text("named by a row but not on main (the branch's own): ", style="yellow"))
        out.print(Text(printable("  " + ", ".join(report.pins.unpinned)), style="dim"))
    for line in report.notes:
        out.print(Text(printable(f"  {line}"), style="yellow"))
    if report.env_problems:
        out.print(Text("environment differs from the declared one:", style="red"))
        for line in report.env_problems:
            out.print(Text(f"  {line}"))
    for line in report.decision.problems:
        out.print(Text(printable(f"- {line}"), style="yellow"))
    word = "passed" if report.passed else "failed"
    out.print(Text(f"verify {report.brief} at {report.head_sha[:12]}: {word}"))


insecure_option = click.option(
    "--insecure-unsigned-evidence",
    "insecure",
    is_flag=True,
    help="Sign nothing and accept unsigned evidence records (anyone who can push a ref "
    "can then forge evidence; the board shows such rows as unsigned).",
)


@click.command("verify")
@click.argument("brief")
@click.option(
    "--sha", default=None, metavar="SHA", help="Verify this commit instead of the review's head."
)
@insecure_option
@click.option(
    "--insecure-unsandboxed-rows",
    "unsandboxed",
    is_flag=True,
    help="Run the rows on the host instead of in the bubblewrap sandbox (branch code "
    "can then read what this process can read); for a machine without bubblewrap.",
)
@forge_option
@json_option
def verify_command(
    brief: str,
    sha: str | None,
    insecure: bool,
    unsandboxed: bool,
    forge: str | None,
    as_json: bool,
) -> None:
    """Re-run BRIEF's verify rows on the review's head in a clean tree and record evidence.

    Exit 0 when every row passes in the declared environment, 1 otherwise. Records are
    signed with the gate's private key (ASSAY_EVIDENCE_KEY, else gate.key in the gate's
    state directory, $ASSAY_GATE_STATE or ~/.local/state/assay-gate, made on first use);
    a key other than the one the forge trusts is refused (exit 77), naming both.
    """
    from assay.sandbox.shield import make_undumpable

    make_undumpable()  # before open_forge reads the token: rows must not reach our environ
    check_id(brief, where="BRIEF")
    handle = open_forge(forge)

    status = err.status("")  # a live line on a terminal, silent otherwise

    def starting(row: RowSpec) -> None:
        if not as_json:
            status.update(Text(f"running {row.id}: {row.command}"))
            status.start()

    def finished(row: RowSpec, record: EvidenceRecord) -> None:
        if not as_json:
            status.stop()
            err.print(Text(f"  {row.id}: {describe(record)} in {record.seconds:.2f}s"))

    with handle:
        try:
            report = verify(
                handle,
                brief,
                sha=sha,
                insecure=insecure,
                unsandboxed=unsandboxed,
                on_start=starting,
                on_row=finished,
            )
        finally:
            status.stop()
        published = _publish_on_forge(handle, report)
    if as_json:
        print_result({**report.to_json(), **published})
    else:
        _print_report(report)
    if not report.passed:
        _exit_failed()


def _publish_on_forge(handle: object, report: VerifyReport) -> dict[str, object]:
    """On GitHub each verify publishes the merge rule's verdict as the gate's signed check
    run at once (``assay.github.gatecheck``). The rule is read back with this process's
    cache, which remembers the evidence tip it has just written: a desk that moved the ref
    back in between makes the read corrupt, and nothing is published. Elsewhere nothing."""
    if getattr(handle, "kind", None) != "github":
        return {}  # assay.github is imported only for a GitHub forge
    from assay.evidence.gate import merge_decision
    from assay.evidence.keys import gate_key
    from assay.github.forge import GitHubForge
    from assay.github.mirror import GitHubMirror
    from assay.github.sync import publish_verified

    assert isinstance(handle, GitHubForge)
    key = gate_key()
    if key is None:  # the insecure mode: nothing a merge could accept
        return {"published": []}
    decision = merge_decision(handle, report.brief, key=key.public)
    return {"published": publish_verified(GitHubMirror(handle), decision, key=key)}


@click.command("merge")
@click.argument("briefs", metavar="[BRIEF]...", nargs=-1)
@click.option(
    "--ready",
    is_flag=True,
    help="Merge every brief whose review is ready, together, in one push to main.",
)
@click.option("--ff-only", is_flag=True, help="Refuse unless main can fast-forward to the head.")
@insecure_option
@click.option(
    "--allow-unsandboxed-evidence",
    "allow_unsandboxed",
    is_flag=True,
    help="Accept rows the gate ran on the host (verify --insecure-unsandboxed-rows); "
    "without it their records block the merge.",
)
@click.option(
    "--insecure-unsandboxed-rows",
    "unsandboxed",
    is_flag=True,
    help="A batch: run the rows on the batch's combined tree on the host instead of in "
    "the bubblewrap sandbox.",
)
@forge_option
@json_option
def merge_command(
    briefs: tuple[str, ...],
    ready: bool,
    ff_only: bool,
    insecure: bool,
    allow_unsandboxed: bool,
    unsandboxed: bool,
    forge: str | None,
    as_json: bool,
) -> None:
    """Merge BRIEF's review into main when every row is verified passing at its head.

    Exit 1 naming each missing, failing, stale or unsandboxed row, or a missing approval
    (a brief with approval: true), otherwise; main is left unchanged.

    With several BRIEFs, or --ready, the briefs merge as one batch: one push to main
    carrying each brief's own squash commit, after the gate runs each brief's rows again
    on the batch's combined tree. A brief the rule refuses, that conflicts, or that fails
    there is left out (named, its reason on its review) and the rest merge; exit 1 when
    any was left out.
    """
    for brief in briefs:
        check_id(brief, where="BRIEF")
    if ready or len(briefs) > 1:
        if ff_only:
            raise UsageError("--ff-only merges one brief; a batch stacks its squash commits")
        _merge_batch(
            briefs,
            ready=ready,
            insecure=insecure,
            allow_unsandboxed=allow_unsandboxed,
            unsandboxed=unsandboxed,
            forge=forge,
            as_json=as_json,
        )
        return
    if not briefs:
        raise UsageError("name a BRIEF to merge, several, or --ready")
    (brief,) = briefs
    with open_forge(forge) as handle:
        try:
            result = merge(
                handle,
                brief,
                ff_only=ff_only,
                insecure=insecure,
                allow_unsandboxed=allow_unsandboxed,
            )
        except MergeRefused as refused:
            if as_json:
                payload = refused.to_json()
                payload.pop("details", None)
                print_result({**payload, "decision": refused.decision.to_json()})
            else:
                out.print(render_rich(refused.decision))
                err.print(Text(f"assay: merge refused for {brief}:"))
                for line in refused.decision.blocking():
                    err.print(Text(f"  {line}"))
            _exit_failed()
    if as_json:
        print_result(result.to_json())
    else:
        out.print(render_rich(result.decision))
        out.print(
            Text(
                f"merged {brief}: main {(result.main_before or '(none)')[:12]} -> "
                f"{result.main_after[:12]} ({result.outcome.value})"
            )
        )


def _merge_batch(
    briefs: tuple[str, ...],
    *,
    ready: bool,
    insecure: bool,
    allow_unsandboxed: bool,
    unsandboxed: bool,
    forge: str | None,
    as_json: bool,
) -> None:
    """``assay merge B1 B2 ...`` / ``--ready``: one batch, a live status line, a table."""
    from assay.evidence.batch import merge_batch, ready_briefs
    from assay.sandbox.shield import make_undumpable

    make_undumpable()  # the gate runs branch code: it must not reach our environ
    status = err.status("")

    def progress(text: str) -> None:
        if not as_json:
            status.update(Text(printable(text)))
            status.start()

    with open_forge(forge) as handle:
        wanted = list(briefs)
        if ready:
            wanted += [b for b in ready_briefs(handle) if b not in wanted]
        try:
            result = merge_batch(
                handle,
                wanted,
                insecure=insecure,
                allow_unsandboxed=allow_unsandboxed,
                unsandboxed=unsandboxed,
                on_progress=progress,
            )
        finally:
            status.stop()
        github = _mirror_batch(handle, result)
    if as_json:
        print_result({**result.to_json(), **github})
    else:
        _print_batch(result)
    if not result.ok:
        _exit_failed()


def _mirror_batch(handle: object, result: BatchResult) -> dict[str, object]:
    """On GitHub the batch moved main over git: its pull requests are then closed, each
    claim comment naming the brief's squash commit (``assay.github.sync.mirror_batch``).
    Elsewhere nothing."""
    if getattr(handle, "kind", None) != "github" or not result.merged:
        return {}
    from assay.github.forge import GitHubForge
    from assay.github.sync import mirror_batch

    assert isinstance(handle, GitHubForge)
    landed = [(entry.brief, entry.commit) for entry in result.squashed if entry.commit]
    try:
        return {"github": mirror_batch(handle, landed)}
    except AssayError as exc:  # main has moved: say what GitHub still shows, do not hide it
        err.print(Text(f"assay: the batch merged, but closing its pull requests failed: {exc}"))
        return {"github": {}, "github_problem": str(exc)}


def _print_batch(result: BatchResult) -> None:
    for part in batch_report(result, width=out.width):
        out.print(part)


def batch_report(result: BatchResult, *, width: int) -> list[Table | Text]:
    """One row per brief (what the batch did, its squash commit, why it was left out),
    fitted to ``width``, then a line saying what moved main."""
    if not result.entries:
        return [Text("no brief to merge: no review is ready")]
    rows = [
        [
            entry.brief,
            entry.outcome.value.replace("_", " "),
            (entry.commit or "")[:12],
            "; ".join(entry.reasons),
        ]
        for entry in result.entries
    ]
    table = fitted_table(["brief", "outcome", "commit", "why"], rows, drop=("commit",), width=width)
    before, after = (result.main_before or "(none)")[:12], (result.main_after or "(none)")[:12]
    if result.merged:
        line = f"merged {len(result.squashed)} brief(s) in one push: main {before} -> {after}"
    else:
        line = f"nothing merged: main stays at {before}"
    return [table, Text(line)]


def register(root: click.Group) -> None:
    """Add ``verify`` and ``merge`` to the root group."""
    root.add_command(verify_command)
    root.add_command(merge_command)
