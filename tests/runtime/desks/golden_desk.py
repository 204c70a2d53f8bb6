"""The desk whose journals are kept as golden files in tests/runtime/golden/.

A tiny agent loop: ask the model, run the tool it asks for, checkpoint, wait for
approval, drain signals, then publish (an effect). ``make_golden.py`` records the journals.
"""

from __future__ import annotations

from typing import Any

from assay.models.base import Message, ModelReply, ToolSpec, Usage
from assay.runtime import Run


class PlanningModel:
    """Asks for one write_file call, then says it is done."""

    name = "planning"
    context_window = 10_000

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        if messages[-1]["role"] == "user":
            call = {
                "id": "c1",
                "type": "function",
                "function": {
                    "name": "write_file",
                    "arguments": '{"path": "a.txt", "text": "hello"}',
                },
            }
            return ModelReply(
                {"role": "assistant", "content": None, "tool_calls": [call]},
                Usage(20, 10, 0.002),
                "planning-1",
            )
        return ModelReply(
            {"role": "assistant", "content": "done"}, Usage(30, 2, 0.001), "planning-1"
        )


def main(run: Run, input: Any) -> Any:
    messages: list[Message] = [
        {"role": "system", "content": "You write files."},
        {"role": "user", "content": input["task"]},
    ]
    reply = run.model(messages)
    messages.append(reply.message)
    for call in reply.message.get("tool_calls") or []:
        result = run.tool("write_file", {"path": "a.txt", "text": "hello"})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})
    final = run.model(messages)
    messages.append(final.message)
    run.checkpoint({"messages": len(messages)})
    decision = run.wait_for("approval")
    steering = run.signals()
    assert decision is not None
    url = run.effect("publish", lambda key: f"https://example.invalid/{key}")
    return {
        "decision": decision.kind,
        "steering": [s.text for s in steering],
        "published": url != "",
    }


def main_reordered(run: Run, input: Any) -> Any:
    """The same desk with the tool call moved before the first model call."""
    run.tool("write_file", {"path": "a.txt", "text": "hello"})
    return main(run, input)
