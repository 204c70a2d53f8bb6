"""What a model said in one wire response: its text and the tool calls it asked for.

``assay.gateway.wire.read_answer`` reads what the gateway needs to account and to refuse
(usage, tool names); a run you can watch needs the words and the arguments too, from the
same bytes the journal recorded (a streamed answer's events exactly as sent). Each API puts
its own stream back together (``WireApi.said``, ``assay.gateway.apis``): Anthropic's content
blocks and their deltas, the chat API's deltas by choice and tool-call index, the Responses
API's output items, Gemini's candidate parts chunk by chunk.
"""

from __future__ import annotations

from typing import Any

from assay.gateway.apis import REGISTRY, Said
from assay.gateway.apis.base import call_of, text_of
from assay.gateway.wire import response_objects


def read_said(api: str, body: bytes, *, stream: bool) -> Said | None:
    """The text and tool calls of a response body of ``api``, or None when it is none."""
    wire = REGISTRY.get(api)
    if wire is None:
        return None
    try:
        objects = response_objects(body, stream=stream)
    except (ValueError, UnicodeDecodeError):
        return None
    return None if objects is None else wire.said(objects)


def said_of_message(message: Any) -> Said:
    """A desk's own model step (``run.model``): the OpenAI-style message it recorded."""
    if not isinstance(message, dict):
        return Said(text=text_of(message))
    calls = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function") or {}
            calls.append(call_of(function.get("name"), function.get("arguments")))
    return Said(text=text_of(message.get("content")), calls=tuple(calls))


__all__ = ["Said", "read_said", "said_of_message"]
