"""Running one brief's rows: each in a pinned tree of its own, read by its runner's report.

``run_brief_rows`` runs a brief's public rows, then its holdout rows, for ``verify`` at a
review's head and for a batch on its combined tree: each row in a fresh checkout with the
acceptance set pinned from main (``pinned_tree``), in the sandbox, with the gate's
reporters switched on for the runners the gate reads (``RowChecks``: a report folder per
run, main's outcomes at the base measured once, ``assay.evidence.results.judge``), and one
unsealed record per row (``run_row_specs``). Holdout rows are opened with the gate's key,
pinned for their own commands, their files placed (``holdout_in_tree``); their records say
nothing of their content, and a row whose content the desk's side holds fails
(``assay.evidence.leaks``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from assay.evidence.gocache import ENTRY, GoCaches
from assay.evidence.holdout import OpenedRow, place_files, sealed_record
from assay.evidence.holdout import open_rows as open_holdout
from assay.evidence.keys import GateKey, gate_state_dir
from assay.evidence.leaks import LEAKED, leaked_rows
from assay.evidence.pinning import PinPlan, apply_pins, plan_for, safe_python_env
from assay.evidence.records import EvidenceRecord
from assay.evidence.results import GO_CACHE, Baselines, ReportFolder, judge, structured_runners
from assay.evidence.runner import RowRun, run_row, withheld_values
from assay.evidence.source import CleanTree
from assay.evidence.spec import RowSpec
from assay.forge import Forge
from assay.journal import Redactor, secrets_from_env
from assay.sandbox import SandboxSpec

if TYPE_CHECKING:
    from assay.evidence.gate import GateContext


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_template(
    brief: str,
    head: str,
    *,
    fingerprint: dict[str, str],
    verifier: str,
    journal_head: str,
    plan: PinPlan | None,
    sandboxed: bool,
    notes: Sequence[str],
) -> EvidenceRecord:
    """The fields every row's record of one run shares (``run_row_specs`` fills in each
    row's own): verify's at a review's head, a batch's on its combined tree."""
    return EvidenceRecord(
        brief=brief,
        row="",
        command="",
        exit=0,
        timed_out=False,
        seconds=0.0,
        output_sha256="",
        output_bytes=0,
        output_tail="",
        head_sha=head,
        env_fingerprint=fingerprint,
        verifier=verifier,
        journal_head=journal_head,
        at="",
        pinned=tuple(plan.pinned) if plan is not None else (),
        sandboxed=sandboxed,
        notes=tuple(notes),
    )


RowRunner = Callable[..., list[EvidenceRecord]]  # run_row_specs with a run's settings bound


def run_brief_rows(
    forge: Forge,
    ctx: GateContext,
    key: GateKey | None,
    head: str,
    *,
    plan: PinPlan | None,
    run: RowRunner,
    reports: Path,
    workdir: Path | None,
    on_start: Callable[[RowSpec], None] | None = None,
    on_row: Callable[[RowSpec, EvidenceRecord], None] | None = None,
    desk_side: Sequence[str] = (),
) -> list[EvidenceRecord]:
    """The brief's rows at ``head``, each in a pinned tree of its own, then its holdout
    rows by the same rules (pinned for their commands too, their runners' reports read),
    with no progress line (it would show the command), their records saying nothing of
    their content: for verify at a review's head and for a batch on its combined tree.
    A holdout row whose content ``desk_side`` (the commits the desk worked with) holds
    fails (``assay.evidence.leaks``)."""
    with Discards() as discards:
        ran = run(
            ctx.rows,
            trees=functools.partial(
                pinned_tree, forge, head, plan, workdir=workdir, discards=discards
            ),
            checks=RowChecks(forge, plan, reports, workdir=workdir),
            on_start=on_start,
            on_row=on_row,
        )
        opened, hidden_plan, place = holdout_in_tree(forge, ctx, key, head)
        hidden = run(
            [row.spec() for row in opened],
            trees=functools.partial(
                pinned_tree, forge, head, plan, workdir=workdir, then=place, discards=discards
            ),
            checks=RowChecks(forge, hidden_plan, reports, workdir=workdir),
            on_start=None,
            on_row=None,
        )
    leaked = leaked_rows(forge, desk_side, opened) if desk_side else set()
    for row, record in zip(opened, hidden, strict=True):
        sealed = sealed_record(record, row)
        if row.row.id in leaked:
            sealed = dataclasses.replace(sealed, findings=(*sealed.findings, LEAKED))
        ran.append(sealed)
        if on_row is not None:
            on_row(row.row.spec(), ran[-1])
    return ran


RowCall = Callable[..., RowRun]  # one run of a row: (tree, report folder, go cache=None)


class RowChecks:
    """The structured verdict of each row (``assay.evidence.results``): which runners it
    reads, a fresh report folder per run, main's outcomes at the base, measured once, and
    the Go build cache main's run leaves for the rows (``assay.evidence.gocache``)."""

    def __init__(
        self, forge: Forge, plan: PinPlan | None, root: Path, *, workdir: Path | None
    ) -> None:
        self.forge = forge
        self.plan = plan
        self.root = root
        self.workdir = workdir
        self.baselines = Baselines(gate_state_dir() / "baselines")
        self.go_caches = GoCaches(gate_state_dir() / ENTRY)

    def runners(self, row: RowSpec) -> tuple[str, ...]:
        return structured_runners(self.plan.runners_of(row.command)) if self.plan else ()

    def go_seed(self, row: RowSpec) -> Path | None:
        """Main's Go build cache for a go row to start a copy of its own from (None: it
        builds cold)."""
        if self.plan is None or "go" not in self.runners(row):
            return None
        return self.go_caches.seed(self.plan.base)

    def baseline(self, row: RowSpec, run: RowCall) -> dict[str, str] | None:
        """Main's outcomes for ``row`` at the brief's base (run there once, then kept);
        for a go row, the build cache that run filled is kept too."""
        if self.plan is None:
            return None
        if not self.plan.main_has_tests(row.command):
            return {}  # main has none of the row's tests: nothing to run there
        cached = self.baselines.get(self.plan.base, row.command)
        if cached is not None:
            return cached
        folder = ReportFolder.make(self.root)
        cache = GoCaches.empty(folder.path) if "go" in self.runners(row) else None
        with CleanTree(self.forge, self.plan.base, parent=self.workdir) as base_tree:
            run(base_tree, folder, cache)
        if cache is not None:
            self.go_caches.keep(self.plan.base, cache)
        tests = folder.read().tests()
        self.baselines.put(self.plan.base, row.command, tests)
        return tests


TreeSource = Callable[[], contextlib.AbstractContextManager[Path]]


class Discards(contextlib.AbstractContextManager["Discards"]):
    """Row trees removed by a thread of their own while the next row runs (removing a
    checkout takes tens of milliseconds on a busy disk); all are gone when the block ends.
    A row's tree is discarded only once its sandbox, and all it started, are dead."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-discard")

    def discard(self, tree: Path) -> None:
        self._pool.submit(shutil.rmtree, tree, True)

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)


@contextlib.contextmanager
def pinned_tree(
    forge: Forge,
    head: str,
    plan: PinPlan | None,
    *,
    workdir: Path | None,
    then: Callable[[Path], object] | None = None,
    discards: Discards | None = None,
) -> Iterator[Path]:
    """A fresh checkout of ``head`` with ``plan``'s pins applied (and ``then`` done to it):
    each row runs in one of its own. A row runs the code under test, which may rewrite the
    tree as it likes; in a shared tree the next row would judge what that code wrote (a
    test edited, the module swapped), not the commit. Removed on exit (by ``discards``,
    when given)."""
    clean = CleanTree(forge, head, parent=workdir)
    tree = clean.__enter__()
    try:
        if plan is not None:
            apply_pins(forge, tree, plan)
        if then is not None:
            then(tree)
        yield tree
    finally:
        if discards is None:
            clean.__exit__(None, None, None)
        else:
            discards.discard(tree)


def run_row_specs(
    rows: Sequence[RowSpec],
    *,
    trees: TreeSource,
    site: Path,
    environ: dict[str, str],
    sandbox: SandboxSpec,
    template: EvidenceRecord,
    key: GateKey | None,
    checks: RowChecks,
    on_start: Callable[[RowSpec], None] | None,
    on_row: Callable[[RowSpec, EvidenceRecord], None] | None,
) -> list[EvidenceRecord]:
    """Run each row in a tree of its own from ``trees`` (``pinned_tree``) and make its
    (unsealed) record from ``template``.

    ``site`` holds the gate's sitecustomize and reporters for the rows' Python
    (``safe_python_env``); each row the gate can read gets its own report folder."""
    environ = safe_python_env(environ, site)
    # The rows' private /tmp hides the gate's folders unless they are bound in.
    sandbox = sandbox.with_read_only(site).with_writable(checks.root)
    # Evidence is committed to the forge: scrub any secret a row found and printed.
    redactor = Redactor([*withheld_values(), *secrets_from_env(()), *([key.text] if key else [])])
    ran: list[EvidenceRecord] = []
    for row in rows:
        if on_start is not None:
            on_start(row)
        runners = checks.runners(row)
        folder = ReportFolder.make(checks.root) if runners else None

        def run(
            where: Path,
            into: ReportFolder | None,
            cache: Path | None = None,
            seed: Path | None = None,
            row: RowSpec = row,
        ) -> RowRun:
            """The row in ``where``: reporting into ``into``; building into ``cache`` (main's
            run), or from a private copy of ``seed`` (``assay_gate_go_cache``)."""
            env = environ if into is None else into.environ(environ, site)
            if cache is not None:
                env = {**env, "GOCACHE": str(cache)}
            start = [str(site / GO_CACHE), str(seed), "--"] if seed is not None else []
            return run_row(
                row.command,
                cwd=where,
                timeout_s=row.timeout_s,
                env=env,
                sandbox=sandbox.with_read_only(seed) if seed is not None else sandbox,
                start=start,
            )

        # Main's run first: a go row starts from the build cache it leaves.
        baseline = checks.baseline(row, run) if folder is not None else None
        with trees() as tree:
            result = run(tree, folder, seed=checks.go_seed(row))
        findings: list[str] = []
        notes = list(template.notes)
        if folder is not None:
            findings = judge(
                runners=runners, reports=folder.read(), exit=result.exit, baseline=baseline
            )
        else:
            notes.append(f"{row.id}: unstructured: judged by its exit code alone")
        record = dataclasses.replace(
            template,
            runner="+".join(runners),
            findings=tuple(findings),
            notes=tuple(notes),
            row=row.id,
            command=row.command,
            exit=result.exit,
            timed_out=result.timed_out,
            seconds=result.seconds,
            output_sha256=result.output_sha256,
            output_bytes=result.output_bytes,
            output_tail=redactor.text(result.output_tail),
            at=_now(),
        )
        ran.append(record)
        if on_row is not None:
            on_row(row, record)
    return ran


def holdout_in_tree(
    forge: Forge, ctx: GateContext, key: GateKey | None, head: str
) -> tuple[list[OpenedRow], PinPlan | None, Callable[[Path], None]]:
    """The brief's holdout rows, opened, with their pin plan and what makes a row's tree
    theirs: a tree pinned for the public rows is pinned to main for the holdout commands
    too (a branch's ``conftest.py`` beside a holdout file is removed like any other), then
    the rows' own files are placed, over anything the branch has at their paths. The plan
    also says which runners each row starts, so their reports are read as for any row. A
    gate without a key (the insecure mode) cannot open them: none run, they stay missing,
    and the merge is refused."""
    if key is None or not ctx.holdout:
        return [], None, lambda tree: None
    opened = open_holdout(key, ctx.holdout, brief=ctx.view.brief)
    plan = plan_for(
        forge,
        head=head,
        main=ctx.view.main,
        commands=[row.spec().command for row in opened],
        protect=ctx.protect,
    )

    def place(tree: Path) -> None:
        if plan is not None:
            apply_pins(forge, tree, plan)  # its lines would name paths the rows use: not kept
        place_files(tree, opened)

    return opened, plan, place
