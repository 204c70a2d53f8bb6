"""The ``openai`` adapter: any OpenAI-compatible chat-completions endpoint with tools.

Works with OpenAI, vLLM, Ollama, llama.cpp's server and others: ``POST
{base_url}/chat/completions``. ``base_url`` defaults to ``$ASSAY_MODEL_BASE_URL`` when set,
else ``https://api.openai.com/v1``; the key is read from ``$<api_key_env>`` at call time and
sent only as a bearer header (a local server without a key needs none).
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from assay.errors import Unavailable
from assay.models.base import Message, ModelReply, ToolSpec, Usage
from assay.models.config import OpenAIConfig
from assay.models.http import HttpAdapter

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def clean_messages(messages: list[Message]) -> list[Message]:
    """Only the keys the chat-completions API knows (Assay's own markers are dropped).

    A tool result recorded as a JSON value is sent as its JSON text, which the API requires.
    """
    cleaned: list[Message] = []
    for message in messages:
        item = {k: message[k] for k in _MESSAGE_KEYS if k in message}
        if item.get("role") == "tool" and not isinstance(item.get("content"), str):
            item["content"] = json.dumps(item.get("content"), sort_keys=True, default=str)
        cleaned.append(item)
    return cleaned


def normalize_tool_calls(calls: Any) -> list[dict[str, Any]]:
    """Tool calls in the canonical shape, ``arguments`` always a JSON string."""
    result: list[dict[str, Any]] = []
    for index, call in enumerate(calls or []):
        function = call.get("function") or {}
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, sort_keys=True)
        result.append(
            {
                "id": str(call.get("id") or f"call_{index}"),
                "type": "function",
                "function": {"name": str(function.get("name", "")), "arguments": arguments},
            }
        )
    return result


class OpenAIModel(HttpAdapter[OpenAIConfig]):
    """``ModelAdapter`` for OpenAI-compatible chat completions."""

    name = "openai"

    def __init__(
        self, config: OpenAIConfig, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        base_url = config.base_url or os.environ.get("ASSAY_MODEL_BASE_URL") or DEFAULT_BASE_URL
        super().__init__(config, base_url=base_url, transport=transport)

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        """One chat completion; ``Unavailable`` after retries, ``Denied`` on a bad key."""
        payload: dict[str, Any] = {"model": self.config.model, "messages": clean_messages(messages)}
        if tools:
            payload["tools"] = tools
        if self.config.max_tokens is not None:
            payload["max_tokens"] = self.config.max_tokens
        if self.config.temperature is not None:
            payload["temperature"] = self.config.temperature
        headers = {"content-type": "application/json"}
        key = self._api_key()
        if key:
            headers["authorization"] = f"Bearer {key}"
        data = self._post("/chat/completions", payload, headers)
        return self._reply(data)

    def _reply(self, data: dict[str, Any]) -> ModelReply:
        try:
            choice = data["choices"][0]
            raw = choice["message"]
            message: Message = {"role": "assistant", "content": raw.get("content")}
            calls = normalize_tool_calls(raw.get("tool_calls"))
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise Unavailable(f"model {self.config.model}: malformed answer ({exc!r})") from exc
        if calls:
            message["tool_calls"] = calls
        usage = data.get("usage") or {}
        in_tokens = int(usage.get("prompt_tokens") or 0)
        out_tokens = int(usage.get("completion_tokens") or 0)
        stop = str(choice.get("finish_reason") or ("tool_calls" if calls else ""))
        return ModelReply(
            message=message,
            usage=Usage(in_tokens, out_tokens, self.config.price.usd(in_tokens, out_tokens)),
            model=str(data.get("model") or self.config.model),
            stop=stop,
        )
