"""OpenAI's two APIs: Chat Completions (``/v1/chat/completions``: mini-swe-agent, most other
CLIs) and Responses (``/v1/responses``: Codex). Their prompt cache is automatic (no
per-item marker; ``prompt_cache_key`` is top-level and volatile); ``cache_control`` is still
set aside, as proxies offering Anthropic models over the chat API take it on content parts.
"""

from __future__ import annotations

import re
from typing import Any

from assay.gateway.apis.base import (
    Answer,
    RoutePattern,
    Said,
    ToolUse,
    WireApi,
    as_int,
    call_of,
    steady,
)
from assay.gateway.volatile import Mask


class OpenAIChatApi(WireApi):
    name = "openai-chat"
    title = "the OpenAI Chat Completions API"
    adapter = "openai"
    routes = (RoutePattern(re.compile(r"/v1/chat/completions")),)
    volatile_top = ("user", "metadata", "prompt_cache_key", "safety_identifier")

    def forwarded(self, body: dict[str, Any], *, stream: bool) -> dict[str, Any]:
        """A chat stream carries usage only when asked; every call's cost must count. The
        extra final chunk is standard, and ``stream_options`` is normalised away."""
        if not stream:
            return body
        options = body.get("stream_options")
        return {
            **body,
            "stream_options": {
                **(options if isinstance(options, dict) else {}),
                "include_usage": True,
            },
        }

    def steady_results(self, item: Any, found: tuple[Mask, ...]) -> Any:
        if isinstance(item, dict) and item.get("role") == "tool":
            return {**item, "content": steady(item.get("content"), found)}
        return item

    def read_answer(self, objects: list[dict[str, Any]]) -> Answer:
        in_t = out_t = 0
        model = ""
        tools: dict[int, ToolUse] = {}
        for obj in objects:
            usage = obj.get("usage")
            if isinstance(usage, dict):
                in_t = max(in_t, as_int(usage.get("prompt_tokens")))
                out_t = max(out_t, as_int(usage.get("completion_tokens")))
            model = str(obj.get("model") or model)
            for choice in obj.get("choices") or []:
                if not isinstance(choice, dict):
                    continue
                part = choice.get("message") or choice.get("delta") or {}
                for index, call in enumerate(part.get("tool_calls") or []):
                    if not isinstance(call, dict):
                        continue
                    slot = as_int(call.get("index", index))
                    name = str((call.get("function") or {}).get("name") or "")
                    if name or slot not in tools:
                        known = tools.get(slot)
                        ident = str(call.get("id") or (known.id if known else ""))
                        tools[slot] = ToolUse(ident, name or (known.name if known else ""))
        return Answer(in_t, out_t, model, tuple(tools[k] for k in sorted(tools)))

    def said(self, objects: list[dict[str, Any]]) -> Said:
        """Deltas by choice and tool-call index put back together."""
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        for obj in objects:
            choices = obj.get("choices") or []
            choice = choices[0] if choices and isinstance(choices[0], dict) else {}
            part = choice.get("message") or choice.get("delta") or {}
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("content"), str):
                text.append(part["content"])
            for index, call in enumerate(part.get("tool_calls") or []):
                if not isinstance(call, dict):
                    continue
                slot = call.get("index", index)
                slot = slot if isinstance(slot, int) else index
                function = call.get("function") or {}
                known = calls.setdefault(slot, {"name": "", "arguments": ""})
                known["name"] = known["name"] or str(function.get("name") or "")
                known["arguments"] += str(function.get("arguments") or "")
        found = tuple(call_of(calls[k]["name"], calls[k]["arguments"]) for k in sorted(calls))
        return Said(text="".join(text), calls=found)

    def calls_in(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        found = []
        for call in item.get("tool_calls") or []:
            if isinstance(call, dict):
                function = call.get("function") or {}
                found.append(
                    {
                        "id": str(call.get("id")),
                        "name": str(function.get("name")),
                        "input": function.get("arguments"),
                    }
                )
        return found

    def results_in(self, item: dict[str, Any]) -> list[tuple[str, Any, bool]]:
        if item.get("role") == "tool":
            return [(str(item.get("tool_call_id")), item.get("content"), False)]
        return []


CALL_ITEMS = ("function_call", "custom_tool_call")
OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output")


class OpenAIResponsesApi(WireApi):
    name = "openai-responses"
    title = "the OpenAI Responses API"
    adapter = "openai"
    routes = (RoutePattern(re.compile(r"/v1/responses")),)
    conversation_key = "input"
    volatile_top = (
        "user",
        "metadata",
        "prompt_cache_key",
        "safety_identifier",
        "previous_response_id",
    )

    def steady_results(self, item: Any, found: tuple[Mask, ...]) -> Any:
        if isinstance(item, dict) and item.get("type") in OUTPUT_ITEMS:
            return {**item, "output": steady(item.get("output"), found)}
        return item

    def with_steering(self, items: list[Any], text: str) -> list[Any]:
        return [
            *items,
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        ]

    def read_answer(self, objects: list[dict[str, Any]]) -> Answer:
        in_t = out_t = 0
        model = ""
        tools: dict[str, ToolUse] = {}
        for obj in objects:
            response = obj.get("response") if isinstance(obj.get("response"), dict) else obj
            assert isinstance(response, dict)
            usage = response.get("usage")
            if isinstance(usage, dict):
                in_t = max(in_t, as_int(usage.get("input_tokens")))
                out_t = max(out_t, as_int(usage.get("output_tokens")))
            model = str(response.get("model") or model)
            items = list(response.get("output") or [])
            if isinstance(obj.get("item"), dict):
                items.append(obj["item"])
            for item in items:
                if isinstance(item, dict) and item.get("type") in (*CALL_ITEMS, "local_shell_call"):
                    ident = str(item.get("call_id") or item.get("id") or "")
                    name = str(item.get("name") or item.get("type"))
                    tools[ident] = ToolUse(ident, name)
        return Answer(in_t, out_t, model, tuple(tools.values()))

    def said(self, objects: list[dict[str, Any]]) -> Said:
        """The output items (the final ``response.completed`` object when there is one)."""
        items: list[Any] = []
        final = [o["response"] for o in objects if isinstance(o.get("response"), dict)]
        completed = [r for r in final if r.get("output")]
        if completed:
            items = list(completed[-1]["output"])
        elif "output" in objects[0]:
            items = list(objects[0]["output"] or [])
        else:
            items = [o["item"] for o in objects if o.get("type") == "response.output_item.done"]
        text, calls = [], []
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "message":
                for part in item.get("content") or []:
                    if isinstance(part, dict) and part.get("type") in ("output_text", "text"):
                        text.append(str(part.get("text", "")))
            elif kind in CALL_ITEMS:
                calls.append(call_of(item.get("name"), item.get("arguments", item.get("input"))))
            elif kind == "local_shell_call":
                calls.append(call_of("local_shell", item.get("action")))
        return Said(text="".join(text), calls=tuple(calls))

    def calls_in(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        if item.get("type") not in CALL_ITEMS:
            return []
        return [
            {
                "id": str(item.get("call_id")),
                "name": str(item.get("name")),
                "input": item.get("arguments", item.get("input")),
            }
        ]

    def results_in(self, item: dict[str, Any]) -> list[tuple[str, Any, bool]]:
        if item.get("type") in OUTPUT_ITEMS:
            return [(str(item.get("call_id")), item.get("output"), False)]
        return []


__all__ = ["OpenAIChatApi", "OpenAIResponsesApi"]
