"""Standing objectives: a brief with ``objective: {judge, max_runs, budget}``.

After each run of the desk, the work is pushed and the judge command runs in a clean
checkout of the branch head cloned from the forge (like an evidence row: argv, no shell,
its own timeout). Exit 0 closes the objective. Otherwise, while runs remain, the brief is
queued again (its claim released, see ``ObjectiveLoop.start_attempt``) and the next run
hears the judge's output; the run's budget pauses it as any run (exit 7). When
``max_runs`` is used up the run waits for ``objective`` (a durable wait: exit 7 reported as
paused, no process held); raising ``max_runs`` on main delivers the event that resumes it
(see ``objective_events``). An objective is never silently failed.

Every decision is a recorded step (``objective.limit``, ``objective.judge``), so a run
resumed elsewhere replays the same attempts against the same limits.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.briefs import Brief
from assay.journal import Journal
from assay.runtime import Event

if TYPE_CHECKING:
    from assay.forge import Forge

JUDGE_TAIL = 4_000
WAITING_FOR = "objective"
REQUEUE = "requeue-"


def requeue_events(journal: Journal | None) -> list[Event]:
    """Events ending the ``requeue-<n>`` waits a journal left pending.

    Computed once, from the journal as a new holder checks it out: the holder that
    recorded the wait never sees its own requeue delivered, the next one always does.
    """
    pending: dict[int, str] = {}
    for entry in journal.entries if journal else []:
        name = str(entry.get("for", ""))
        if entry.get("kind") == "wait" and name.startswith(REQUEUE):
            pending[int(entry.get("pos", 0))] = name
        elif entry.get("kind") == "wake":
            pending.pop(int(entry.get("pos", 0)), None)
    return [
        Event(id=name, kind="approve", actor="queue", text="run again", data={"name": name})
        for name in pending.values()
    ]


def judge_count(journal: Journal | None) -> int:
    """How many judge verdicts a journal holds (finished ``objective.judge`` steps)."""
    return sum(
        1
        for entry in (journal.entries if journal else [])
        if entry.get("kind") == "step"
        and entry.get("name") == "objective.judge"
        and entry.get("status") == "ok"
    )


def objective_events(brief: Brief, journal: Journal | None) -> list[Event]:
    """The event a raised ``max_runs`` delivers: it ends a wait for ``objective``."""
    if brief.objective is None:
        return []
    max_runs = brief.objective.max_runs
    if judge_count(journal) >= max_runs:
        return []
    return [
        Event(
            id=f"objective-max-runs-{max_runs}",
            kind="approve",
            actor="main",
            text=f"objective max_runs is {max_runs}",
            data={"name": WAITING_FOR},
        )
    ]


def judge_environment(secrets: Iterable[str] = ()) -> dict[str, str]:
    """The judge's environment: ours without what an evidence row may not see (secret-like
    names, ``$ASSAY_SECRET_ENV``'s, git plumbing) and without any variable holding one of
    ``secrets`` (the forge's token under whatever name it was given)."""
    from assay.evidence.runner import row_environment

    withheld = [value for value in secrets if value]
    return {
        name: value
        for name, value in row_environment().items()
        if not any(secret in value for secret in withheld)
    }


def run_judge(
    forge: Forge,
    sha: str,
    argv: list[str],
    *,
    timeout: float,
    secrets: Iterable[str] = (),
) -> dict[str, Any]:
    """Run the judge in a fresh clone of ``sha`` from the forge, in the sandbox the gate's
    rows get (no network, the clone its only writable path); never through a shell."""
    from assay.evidence.runner import gate_sandbox
    from assay.plumbing import checkout_detached
    from assay.sandbox import run_sandboxed

    tmp = Path(tempfile.mkdtemp(prefix="assay-judge-"))
    try:
        tree = tmp / "tree"
        checkout_detached(tree, sha, fetch_from=forge.url, config=forge.git_config)
        result = run_sandboxed(
            argv,
            cwd=tree,
            env=judge_environment(secrets),
            spec=gate_sandbox(),
            timeout_s=timeout,
            max_output_bytes=2 * JUDGE_TAIL,
        )
        code, output = result.exit, result.last(JUDGE_TAIL)
        if result.timed_out:
            code, output = 124, f"judge timed out after {timeout:.0f} s"
        return {
            "exit": code,
            "seconds": result.seconds,
            "tail": output[-JUDGE_TAIL:],
            "head_sha": sha,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class ObjectiveLoop:
    """The judge-and-retry bookkeeping of one brief's objective, as recorded steps."""

    def __init__(
        self, *, brief: Brief, forge: Forge, hooks: Any, secrets: Iterable[str] = ()
    ) -> None:
        objective = brief.objective
        assert objective is not None
        self.brief = brief
        self.forge = forge
        self.hooks = hooks
        self.secrets = [*secrets, *(getattr(forge, "secrets", ()) or ())]
        self.argv = objective.argv
        self.timeout = float(objective.timeout or 600)
        self.attempts = 0

    def _judge(self) -> dict[str, Any]:
        self.hooks.durability_point("objective.judge")  # the judge sees the pushed work
        return run_judge(
            self.forge,
            str(self.hooks.sync.tip),
            self.argv,
            timeout=self.timeout,
            secrets=self.secrets,
        )

    def start_attempt(self, run: Any) -> int:
        """Count a new run; wait durably (paused) while ``max_runs`` is used up.

        Every run after the first is queued again first: a durable wait for
        ``requeue-<n>`` that the process which recorded it cannot satisfy, so the run
        stops there, the claim is released, and whichever desk takes the brief next (by
        priority, like any brief) delivers the wait and continues with run ``n``.
        """
        brief = self.brief
        while True:
            assert brief.objective is not None
            limit = int(
                run.step("objective.limit", lambda: brief.objective.max_runs, kind="compute")
            )
            if self.attempts < limit:
                self.attempts += 1
                if self.attempts > 1:
                    run.wait_for(f"{REQUEUE}{self.attempts}")
                return self.attempts
            run.wait_for(WAITING_FOR)

    def judge(self, run: Any) -> tuple[bool, str]:
        """Run the judge (a recorded step); ``(closed, feedback for the next run)``."""
        verdict = run.step("objective.judge", self._judge, kind="compute")
        if verdict["exit"] == 0:
            return True, ""
        return False, (
            f"Run {self.attempts} did not satisfy the objective: `{' '.join(self.argv)}` "
            f"exited {verdict['exit']}.\n\n```\n{verdict['tail'][-1500:]}\n```"
        )


def with_objective(
    function: Callable[[Any, Brief], Any],
    *,
    brief: Brief,
    forge: Forge,
    hooks: Any,
    secrets: Iterable[str] = (),
) -> Callable[[Any, Brief], Any]:
    """Wrap a ``command`` or ``python`` desk function in the objective loop of ``brief``.

    (The ``agent`` kind runs the loop inside its conversation instead, so the model hears
    the judge's verdict and carries on; see ``assay.desks.kinds.agent``.)
    """

    def wrapped(run: Any, current: Brief) -> Any:
        loop = ObjectiveLoop(brief=current, forge=forge, hooks=hooks, secrets=secrets)
        feedback = ""
        while True:
            attempt = loop.start_attempt(run)
            shown = current
            if feedback:
                body = f"{current.body}\n\n## Objective judge\n\n{feedback}"
                shown = current.model_copy(update={"body": body})
            output = function(run, shown)
            if isinstance(output, dict) and output.get("status") == "cancelled":
                return output
            closed, feedback = loop.judge(run)
            if closed:
                result = dict(output) if isinstance(output, dict) else {"output": output}
                result["objective"] = {"attempts": attempt, "state": "closed"}
                return result

    return wrapped
