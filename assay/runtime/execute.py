"""``execute()``: run a desk function durably to its end, a wait, a pause or a failure.

The function is ``fn(run, input)``. A journal that already records the run's ``end``
returns that result without running anything; otherwise the function is replayed from
the start and continues live where the journal stops.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.errors import AssayError, Diverged, Failed, Paused, Suspended, Suspension
from assay.journal import entries, load_packed
from assay.journal.format import canonical
from assay.runtime.run import Run, utcnow
from assay.runtime.shapes import to_json_value
from assay.runtime.types import RunResult

DeskFunction = Callable[[Run, Any], Any]


def execute(fn: DeskFunction, input: Any = None, *, journal_dir: Path, **options: Any) -> RunResult:
    """Run ``fn(run, input)`` durably in ``journal_dir``; ``options`` go to ``Run.open``.

    Returns a ``RunResult`` for ok (0), failed (1), paused (7) and suspended (75); other
    ``AssayError``s (diverged, corrupt, fenced, denied, unavailable…) are raised.
    """
    run = Run.open(journal_dir, **options)
    try:
        return execute_run(run, fn, input)
    finally:
        run.close()


def recorded_result(run: Run) -> RunResult | None:
    """The result of a run whose journal already records its end."""
    end = run.history.end
    if end is None:
        return None
    output = load_packed(run.directory, end.get("out"))
    if end.get("status") == "ok":
        return RunResult("ok", 0, output, run.steps)
    return RunResult("failed", Failed.code, output, run.steps, message=str(end.get("message", "")))


def execute_run(run: Run, fn: DeskFunction, input: Any) -> RunResult:
    """``execute()`` on a run the caller opened (and will close), e.g. to inspect
    ``run.journal.torn`` first."""
    done = recorded_result(run)
    if done is not None:
        return done
    given = to_json_value(input, label="input")
    assert run.writer is not None
    start = run.history.start
    if start is None:
        packed, blobs = run.writer.pack(given)
        start_entry = entries.Start(
            input=packed,
            sandbox=run.start_fields.get("sandbox"),
            durability=run.start_fields.get("durability"),
            t=utcnow(),
            blobs=tuple(blobs),
        )
        run.history.start = run.writer.append(start_entry)
    else:
        recorded = load_packed(run.directory, start.get("in"))
        if canonical(run.writer.redactor.value(given)) != canonical(recorded):
            raise Diverged(
                "the input differs from the one this run started with "
                f"(recorded {canonical(recorded)[:80]}, given {canonical(given)[:80]})"
            )
        given = recorded
    try:
        output = fn(run, given)
        run.finished_replay()
    except Suspension as waiting:
        return RunResult(
            "suspended",
            Suspended.code,
            None,
            run.steps,
            waiting_for=waiting.waiting_for,
            message=f"waiting for {waiting.waiting_for}"
            + (f" until {waiting.until}" if waiting.until else ""),
        )
    except Paused as paused:
        return RunResult("paused", Paused.code, None, run.steps, message=paused.message)
    except Failed as failure:
        return _fail(run, failure)
    except AssayError:
        raise
    except Exception as failure:
        return _fail(run, failure)
    value = to_json_value(output, label="the run's output")
    packed, blobs = run.writer.pack(value)
    run.writer.append(entries.End(status="ok", out=packed, t=utcnow(), blobs=tuple(blobs)))
    run._durable("end")
    return RunResult("ok", 0, value, run.steps)


def _fail(run: Run, failure: Exception) -> RunResult:
    """Compensate in reverse order, then record the failure and the end."""
    assert run.writer is not None
    run.compensate()
    error = {"type": type(failure).__name__, "message": str(failure)}
    run.writer.append(entries.Error(error=error, t=utcnow()))
    message = f"{error['type']}: {error['message']}"
    run.writer.append(
        entries.End(status="failed", out={"value": {"error": error}}, message=message, t=utcnow())
    )
    run._durable("end")
    return RunResult("failed", Failed.code, {"error": error}, run.steps, message=message)
