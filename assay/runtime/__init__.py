"""The durable runtime: ``Run`` (steps, model and tool calls, effects, waits, signals,
budgets, compensation), ``execute()``, ``Replayer`` and the local event store.

Desk code is an ordinary function ``fn(run, input)``; everything non-deterministic goes
through ``run`` so that a killed process resumes at its exact step (DESIGN.md section 7).
"""

from __future__ import annotations

from assay.runtime.events import LocalEventStore
from assay.runtime.execute import DeskFunction, execute, execute_run, recorded_result
from assay.runtime.loader import load_target
from assay.runtime.replay import Replayer, ReplayResult
from assay.runtime.run import EndOfHistory, Run
from assay.runtime.shapes import Shape
from assay.runtime.types import (
    EVENT_KINDS,
    Budget,
    Event,
    RunHooks,
    RunResult,
    StepError,
    StepOutputError,
    ToolRunner,
)

__all__ = [
    "EVENT_KINDS",
    "Budget",
    "DeskFunction",
    "EndOfHistory",
    "Event",
    "LocalEventStore",
    "ReplayResult",
    "Replayer",
    "Run",
    "RunHooks",
    "RunResult",
    "Shape",
    "StepError",
    "StepOutputError",
    "ToolRunner",
    "execute",
    "execute_run",
    "load_target",
    "recorded_result",
]
