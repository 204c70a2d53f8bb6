"""Small desks for runtime tests: waits, signals, budgets, compensation, secrets."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from assay.models.base import Message, ModelReply, ToolSpec, Usage
from assay.runtime import Run


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


class EchoModel:
    """Replies ``echo <last content>``; counts calls in ``$MODEL_COUNTER`` when set."""

    name = "echo"
    context_window = 1_000_000

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        if os.environ.get("MODEL_COUNTER"):
            _append(os.environ["MODEL_COUNTER"], str(len(messages)))
        content = str(messages[-1].get("content", ""))
        return ModelReply(
            {"role": "assistant", "content": f"echo {content}"}, Usage(len(content), 5, 0.01)
        )


def make_echo_model() -> EchoModel:
    return EchoModel()


def approval(run: Run, input: Any) -> Any:
    """Prepare, wait for approval, report the decision."""
    prepared = run.step("prepare", lambda: "ready")
    event = run.wait_for("approval")
    assert event is not None
    return {"prepared": prepared, "decision": event.kind, "note": event.text}


def steering(run: Run, input: Any) -> Any:
    """Three drains of steering signals, with a wait for "go" after the first."""
    seen = []
    for i in range(3):
        run.step(f"work{i}", lambda i=i: i)
        seen.append([event.text for event in run.signals()])
        if i == 0:
            run.wait_for("go")
    return seen


def napper(run: Run, input: Any) -> Any:
    """Sleeps for an hour: a timer wait."""
    run.step("before", lambda: 1)
    run.sleep(3600)
    return "woke"


def chatty(run: Run, input: Any) -> Any:
    """Four model calls in one conversation; a model-call budget pauses it."""
    messages: list[Message] = [{"role": "system", "content": "echo"}]
    for i in range(4):
        messages.append({"role": "user", "content": f"turn {i}"})
        reply = run.model(messages)
        messages.append(reply.message)
    return [m["content"] for m in messages if m["role"] == "assistant"]


def _undo(log: str, name: str) -> None:
    if os.environ.get("COMP_PAUSE") == name:
        Path(os.environ["COMP_MARKER"]).write_text(name)
        while True:  # held here until the test kills the process
            signal.pause()
    _append(log, f"undo {name}")


def booking(run: Run, input: Any) -> Any:
    """Three effects with compensations, then a failing step."""
    log = input["log"]
    for name in ("a", "b", "c"):
        run.effect(
            f"book-{name}",
            lambda key, name=name: _append(log, f"do {name}"),
            compensate=lambda name=name: _undo(log, name),
        )

    def fail() -> None:
        raise RuntimeError("the payment provider said no")

    run.step("charge", fail)
    return "unreachable"


def leaky(run: Run, input: Any) -> Any:
    """Handles a secret everywhere it could leak: outputs, messages, checkpoints, effects."""
    name = os.environ.get("LEAKY_ENV", "SECRET_TOKEN")  # the variable holding the value
    token = run.step("read-token", lambda: os.environ[name])
    reply = run.model([{"role": "user", "content": f"use {token} please " + "x" * 3000}])
    run.checkpoint({"token": token, "reply": reply.message})
    run.effect("post", lambda key: {"sent": f"Bearer {os.environ[name]}"})
    return {"said": reply.message["content"][:40]}
