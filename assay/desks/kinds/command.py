"""The ``command`` desk kind: the manifest's argv, run once in the work tree as one step.

The command runs through the one process runner (``assay.sandbox.run_sandboxed``), in the
desk's sandbox, with a scrubbed environment; the brief reaches it as a file, never through
a shell or the argv.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from assay.briefs import Brief
from assay.sandbox import run_sandboxed, sandbox_environment

COMMAND_TAIL = 4_000


def command_desk(
    desk: Any, worktree: Path, *, withheld: Iterable[str] = ()
) -> Callable[[Any, Brief], Any]:
    """A ``command`` desk: its argv runs once in the work tree, in the desk's sandbox, as
    one recorded step.

    The brief reaches the command as a read-only file named by ``ASSAY_BRIEF_FILE`` (never
    through a shell or the argv), so brief text cannot become a command.
    """
    argv = list(desk.command or [])
    timeout = float(desk.command_timeout_s)
    # The desk's own files (a script beside the manifest) are readable, not writable.
    spec = desk.sandbox_spec().with_read_only(Path(desk.base_dir).resolve())

    def function(run: Any, brief: Brief) -> Any:
        def body() -> dict[str, Any]:
            with tempfile.TemporaryDirectory(prefix="assay-brief-") as tmp:
                brief_file = Path(tmp) / f"{brief.id}.md"
                brief_file.write_text(f"# {brief.title}\n\n{brief.body}", encoding="utf-8")
                env = sandbox_environment(
                    secrets=desk.secrets,
                    withheld=withheld,
                    extra={"ASSAY_BRIEF_ID": brief.id, "ASSAY_BRIEF_FILE": str(brief_file)},
                )
                done = run_sandboxed(
                    argv,
                    cwd=worktree,
                    env=env,
                    spec=spec.with_read_only(Path(tmp)),
                    timeout_s=timeout,
                    max_output_bytes=2 * COMMAND_TAIL,
                )
            return {"exit": done.exit, "tail": done.last(COMMAND_TAIL)}

        result = run.step("command", body, kind="compute")
        status = "done" if result["exit"] == 0 else "failed"
        return {"status": status, "summary": f"command exited {result['exit']}", "evidence": []}

    return function
