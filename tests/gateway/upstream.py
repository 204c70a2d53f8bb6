"""A scripted model upstream speaking the three wire APIs, streaming (SSE) and not.

``WireFake(responses)`` serves ``/v1/messages`` (+ ``count_tokens``), ``/v1/chat/completions``
and ``/v1/responses`` on 127.0.0.1 from one script (the scripted-model shape: ``content``,
``tool_calls: [{name, arguments}]``, ``usage``). The answer is chosen by the number of
assistant turns in the request, so a resumed conversation gets the same answer. The
counters, injected failures and ``hold``/``release`` are those of ``FakeModelServer``;
``garbage`` answers 200 with a body that is no API's.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes._base import FakeModelServer, usage_of


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


class WireFake(FakeModelServer):
    """The three APIs from one script (see the module docstring)."""

    garbage = False

    def assistant_turns(self, body: dict[str, Any]) -> int:
        if "input" in body:
            items = body["input"] if isinstance(body["input"], list) else []
            return sum(
                1
                for i in items
                if isinstance(i, dict)
                and (i.get("type") == "function_call" or i.get("role") == "assistant")
            )
        messages = body.get("messages") or []
        return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")

    def render(self, response: dict[str, Any], turn: int) -> dict[str, Any]:
        return {"response": response, "turn": turn}  # rendered per route by the handler

    def start(self) -> WireFake:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        import threading

        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self


def anthropic_body(response: dict[str, Any], turn: int, model: str) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if response.get("content"):
        blocks.append({"type": "text", "text": response["content"]})
    for index, call in enumerate(response.get("tool_calls") or []):
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{turn}_{index}",
                "name": call["name"],
                "input": call.get("arguments") or {},
            }
        )
    in_t, out_t = usage_of(response)
    return {
        "id": f"msg_{turn}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use" if response.get("tool_calls") else "end_turn",
        "usage": {"input_tokens": in_t, "output_tokens": out_t},
    }


def anthropic_stream(body: dict[str, Any]) -> bytes:
    start = {**body, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": body["usage"]["input_tokens"], "output_tokens": 1}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": first},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": body["stop_reason"]},
                "usage": {"output_tokens": body["usage"]["output_tokens"]},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return _sse(events)


def chat_body(response: dict[str, Any], turn: int, model: str) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{turn}_{index}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})},
        }
        for index, c in enumerate(response.get("tool_calls") or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": response.get("content")}
    if calls:
        message["tool_calls"] = calls
    in_t, out_t = usage_of(response)
    return {
        "id": f"chatcmpl-{turn}",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": in_t, "completion_tokens": out_t, "total_tokens": in_t + out_t},
    }


def chat_stream(body: dict[str, Any]) -> bytes:
    message = body["choices"][0]["message"]
    base = {"id": body["id"], "object": "chat.completion.chunk", "model": body["model"]}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(message["tool_calls"])]
    finish = body["choices"][0]["finish_reason"]
    return _sse(
        [
            (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
            (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
            (None, {**base, "choices": [], "usage": body["usage"]}),
            (None, "[DONE]"),
        ]
    )


def responses_body(response: dict[str, Any], turn: int, model: str) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if response.get("content"):
        output.append(
            {
                "type": "message",
                "id": f"msg_{turn}",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": response["content"], "annotations": []}
                ],
            }
        )
    for index, c in enumerate(response.get("tool_calls") or []):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{turn}_{index}",
                "call_id": f"call_{turn}_{index}",
                "name": c["name"],
                "arguments": json.dumps(c.get("arguments") or {}),
                "status": "completed",
            }
        )
    in_t, out_t = usage_of(response)
    return {
        "id": f"resp_{turn}",
        "object": "response",
        "status": "completed",
        "model": model,
        "output": output,
        "usage": {"input_tokens": in_t, "output_tokens": out_t, "total_tokens": in_t + out_t},
    }


def responses_stream(body: dict[str, Any]) -> bytes:
    events: list[tuple[str | None, Any]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "response": {**body, "status": "in_progress", "output": []},
            },
        )
    ]
    for index, item in enumerate(body["output"]):
        events.append(
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": item},
            )
        )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    events.append(("response.completed", {"type": "response.completed", "response": body}))
    return _sse(events)


RENDER = {
    "/v1/messages": (anthropic_body, anthropic_stream),
    "/v1/chat/completions": (chat_body, chat_stream),
    "/v1/responses": (responses_body, responses_stream),
}


def _handler(server: WireFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            path = self.path.split("?")[0]
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, {}, b'{"error": {"message": "not JSON"}}', "application/json")
                return
            if path == "/v1/messages/count_tokens":
                self._send(200, {}, json.dumps({"input_tokens": 42}).encode(), "application/json")
                return
            if path not in RENDER:
                self._send(404, {}, b'{"error": {"message": "no route"}}', "application/json")
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload = server.handle(body, headers)
            if status != 200:
                self._send(status, extra, json.dumps(payload).encode(), "application/json")
                return
            if server.garbage:
                self._send(200, {}, b"<html>not an API</html>", "text/html")
                return
            whole, streamed = RENDER[path]
            rendered = whole(payload["response"], payload["turn"], server.model)
            if body.get("stream"):
                self._send(200, {}, streamed(rendered), "text/event-stream")
            else:
                self._send(200, {}, json.dumps(rendered).encode(), "application/json")

        def _send(self, status: int, extra: dict[str, str], data: bytes, ctype: str) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
