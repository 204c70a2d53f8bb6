"""The ``gemini`` adapter: Google's Gemini API (``generateContent``), translated to and from
the OpenAI shape, for agent desks (a cli desk's gateway forwards the Gemini CLI's own
requests instead: ``assay.gateway.upstream``).

``system`` messages become ``systemInstruction``; user and assistant messages become
``user`` and ``model`` contents (consecutive ones of a role merged, as the API requires);
assistant ``tool_calls`` become ``functionCall`` parts and ``tool`` messages
``functionResponse`` parts of a user turn, named from the call they answer; tools become
``functionDeclarations`` with their JSON Schema as ``parametersJsonSchema``. The model is in
the path (``POST {base_url}/v1beta/models/{model}:generateContent``); the key is read from
``$<api_key_env>`` at call time and sent only as ``x-goog-api-key``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from assay.errors import Unavailable
from assay.models.base import Message, ModelReply, ToolSpec, Usage
from assay.models.config import GeminiConfig
from assay.models.http import HttpAdapter

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
_STOPS = {"STOP": "stop", "MAX_TOKENS": "length"}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return json.dumps(content, sort_keys=True, default=str)


def to_gemini(
    messages: list[Message], tools: list[ToolSpec] | None = None
) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(system text, Gemini contents, Gemini tools) for an OpenAI conversation."""
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> the function it called
    for message in messages:
        role = message.get("role")
        if role == "system":
            system.append(_text(message.get("content")))
            continue
        parts: list[dict[str, Any]] = []
        if role == "tool":
            output = message.get("content")
            ident = str(message.get("tool_call_id") or "")
            name = names.get(ident) or str(message.get("name") or "")
            response = {"output": output if isinstance(output, str) else _text(output)}
            parts.append({"functionResponse": {"name": name, "response": response}})
            _add(contents, "user", parts)
            continue
        text = _text(message.get("content"))
        if text:
            parts.append({"text": text})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            name = str(function.get("name") or "")
            names[str(call.get("id") or "")] = name
            arguments = function.get("arguments") or "{}"
            try:
                args = json.loads(arguments) if isinstance(arguments, str) else arguments
            except ValueError:
                args = {"arguments": arguments}
            parts.append({"functionCall": {"name": name, "args": args}})
        _add(contents, "model" if role == "assistant" else "user", parts)
    return "\n\n".join(s for s in system if s), contents, _tool_specs(tools)


def _add(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": list(parts)})


def _tool_specs(tools: list[ToolSpec] | None) -> list[dict[str, Any]]:
    declarations = []
    for tool in tools or []:
        function = tool.get("function") or tool
        declared: dict[str, Any] = {
            "name": function["name"],
            "description": function.get("description", ""),
        }
        if function.get("parameters"):
            declared["parametersJsonSchema"] = function["parameters"]
        declarations.append(declared)
    return [{"functionDeclarations": declarations}] if declarations else []


def from_gemini(data: dict[str, Any]) -> tuple[Message, str]:
    """(the assistant message in the OpenAI shape, the stop reason) of a response."""
    candidate = data["candidates"][0]
    parts = (candidate.get("content") or {}).get("parts") or []
    text = "".join(
        str(p["text"]) for p in parts if isinstance(p.get("text"), str) and not p.get("thought")
    )
    calls = []
    for index, part in enumerate(p for p in parts if isinstance(p.get("functionCall"), dict)):
        call = part["functionCall"]
        calls.append(
            {
                "id": str(call.get("id") or f"call_{index}"),
                "type": "function",
                "function": {
                    "name": str(call.get("name", "")),
                    "arguments": json.dumps(call.get("args") or {}, sort_keys=True),
                },
            }
        )
    message: Message = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
        return message, "tool_calls"
    return message, _STOPS.get(str(candidate.get("finishReason") or "STOP"), "stop")


class GeminiModel(HttpAdapter[GeminiConfig]):
    """``ModelAdapter`` for the Gemini API."""

    name = "gemini"

    def __init__(
        self, config: GeminiConfig, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        super().__init__(config, base_url=config.base_url or DEFAULT_BASE_URL, transport=transport)

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        """One ``generateContent`` call; ``Unavailable`` after retries, ``Denied`` on a bad key."""
        system, contents, specs = to_gemini(messages, tools)
        payload: dict[str, Any] = {"contents": contents}
        if system:
            payload["systemInstruction"] = {"parts": [{"text": system}]}
        if specs:
            payload["tools"] = specs
        generation: dict[str, Any] = {}
        if self.config.max_tokens is not None:
            generation["maxOutputTokens"] = self.config.max_tokens
        if self.config.temperature is not None:
            generation["temperature"] = self.config.temperature
        if generation:
            payload["generationConfig"] = generation
        headers = {"content-type": "application/json"}
        key = self._api_key()
        if key:
            headers["x-goog-api-key"] = key
        version = "" if self.base_url.endswith("/v1beta") else "/v1beta"
        data = self._post(f"{version}/models/{self.config.model}:generateContent", payload, headers)
        try:
            message, stop = from_gemini(data)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise Unavailable(f"model {self.config.model}: malformed answer ({exc!r})") from exc
        usage = data.get("usageMetadata") or {}
        in_tokens = int(usage.get("promptTokenCount") or 0)
        out_tokens = int(usage.get("candidatesTokenCount") or 0) + int(
            usage.get("thoughtsTokenCount") or 0
        )
        return ModelReply(
            message=message,
            usage=Usage(in_tokens, out_tokens, self.config.price.usd(in_tokens, out_tokens)),
            model=str(data.get("modelVersion") or self.config.model),
            stop=stop,
        )
