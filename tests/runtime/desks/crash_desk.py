"""A 30-step desk for crash tests: compute, model and effect steps, each counted.

Every step body appends its number to the counter file (outside the journal). When
``CRASH_PAUSE`` is ``"<step>:<before|after>"`` (or ``"end"``), the body writes the
``CRASH_MARKER`` file at that point and blocks, so the test can SIGKILL the process there.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from assay.models.base import Message, ModelReply, ToolSpec, Usage
from assay.runtime import Run

STEPS = 30


def _pause(point: str) -> None:
    if os.environ.get("CRASH_PAUSE") == point:
        Path(os.environ["CRASH_MARKER"]).write_text(point)
        while True:  # held here until the test kills the process
            signal.pause()


def _count(counter: str, line: str) -> None:
    with open(counter, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def kind_of(i: int) -> str:
    if i % 5 == 0:
        return "model"
    if i % 7 == 0:
        return "effect"
    return "compute"


class CountingModel:
    """A model whose every call is counted in the counter file of the run."""

    name = "counting"
    context_window = 100_000

    def __init__(self) -> None:
        self.counter = os.environ["CRASH_COUNTER"]

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        i = int(messages[-1]["content"].split()[-1])
        _pause(f"{i}:before")
        _count(self.counter, str(i))
        _pause(f"{i}:after")
        return ModelReply({"role": "assistant", "content": f"square {i * i}"}, Usage(3, 2, 0.001))


def make_model() -> CountingModel:
    return CountingModel()


def main(run: Run, input: Any) -> Any:
    counter = input["counter"]
    effects = input["effects"]
    total = 0
    messages: list[Message] = [{"role": "system", "content": "square numbers"}]
    for i in range(1, STEPS + 1):
        kind = kind_of(i)
        if kind == "model":
            messages.append({"role": "user", "content": f"square {i}"})
            reply = run.model(messages)
            messages.append(reply.message)
            value = int(reply.message["content"].split()[-1])
        elif kind == "effect":

            def act(key: str, i: int = i) -> int:
                _pause(f"{i}:before")
                _count(counter, str(i))
                _count(effects, f"{i} {key}")
                _pause(f"{i}:after")
                return i * i

            value = run.effect(f"e{i}", act)
        else:

            def body(i: int = i) -> int:
                _pause(f"{i}:before")
                _count(counter, str(i))
                _pause(f"{i}:after")
                return i * i

            value = run.step(f"s{i}", body)
        total += value
        if i == 15:
            run.checkpoint({"total": total, "at": i})
    _pause("end")
    return {"total": total, "steps": STEPS, "state": run.state()}
