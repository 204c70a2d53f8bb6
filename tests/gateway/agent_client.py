"""A minimal agent CLI for tests: the loop every agent CLI runs, in each wire API.

It sends the conversation, runs the tool calls of the answer in its working directory
(``Write {path, content}`` writes a file, ``Bash {command}`` runs ``sh -c``; any other
tool answers "unknown tool"), appends the results and asks again until an answer calls
no tool; it prints that answer's text and exits 0 (an HTTP error: its body on stderr,
exit 1). With ``side`` (``before``, ``after`` or ``concurrent``) it also sends a
token-count side request with each turn (Anthropic only), as Claude Code does.

As a process (``python tests/gateway/agent_client.py [--api API] [--stream] [--side WHEN]
PROMPT``; it imports nothing of Assay or the tests) it finds the gateway the way the
``generic`` profile points CLIs at it (``ANTHROPIC_BASE_URL``/``OPENAI_BASE_URL``/
``GOOGLE_GEMINI_BASE_URL`` and the matching ``*_API_KEY``/``GEMINI_API_KEY``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROUTES = {
    "anthropic": "/v1/messages",
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "gemini": "/v1beta/models/{model}:generateContent",
}
GEMINI_STREAM = "/v1beta/models/{model}:streamGenerateContent?alt=sse"
TOOLS = [
    {"name": "Write", "description": "write a file", "parameters": {"type": "object"}},
    {"name": "Bash", "description": "run a command", "parameters": {"type": "object"}},
]


class ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


@dataclass
class Transcript:
    raw: list[bytes] = field(default_factory=list)  # every answer body, as received
    final: str = ""
    tools_run: list[str] = field(default_factory=list)


def run_tool(name: str, args: dict[str, Any], cwd: Path) -> str:
    if name == "Write":
        target = cwd / str(args["path"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(args["content"]), encoding="utf-8")
        return f"wrote {args['path']}"
    if name == "Bash":
        done = subprocess.run(
            ["sh", "-c", str(args["command"])], cwd=cwd, capture_output=True, text=True, timeout=60
        )
        return (done.stdout + done.stderr).strip() or f"exit {done.returncode}"
    return f"unknown tool {name}"


def _events(raw: bytes) -> list[dict[str, Any]]:
    found = []
    for block in raw.decode().split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    found.append(json.loads(data))
    return found


def parse(
    api: str, raw: bytes, stream: bool
) -> tuple[str, list[tuple[str, str, dict[str, Any]]], Any]:
    """(text, [(id, name, args)], the assistant item(s) to append) of an answer."""
    if api == "gemini":
        return _gemini(raw, stream)
    if api == "anthropic":
        if stream:
            blocks: list[dict[str, Any]] = []
            for event in _events(raw):
                if event["type"] == "content_block_start":
                    blocks.append(dict(event["content_block"]))
                    blocks[-1]["_json"] = ""
                elif event["type"] == "content_block_delta":
                    delta = event["delta"]
                    if delta["type"] == "text_delta":
                        blocks[-1]["text"] = blocks[-1].get("text", "") + delta["text"]
                    else:
                        blocks[-1]["_json"] += delta["partial_json"]
            for block in blocks:
                text = block.pop("_json")
                if block["type"] == "tool_use":
                    block["input"] = json.loads(text or "{}")
            content = blocks
        else:
            content = json.loads(raw)["content"]
        text = "".join(b.get("text", "") for b in content if b["type"] == "text")
        calls = [(b["id"], b["name"], b["input"]) for b in content if b["type"] == "tool_use"]
        return text, calls, {"role": "assistant", "content": content}
    if api == "openai-chat":
        if stream:
            message: dict[str, Any] = {"role": "assistant", "content": ""}
            slots: dict[int, dict[str, Any]] = {}  # tool calls arrive in pieces, by index
            for event in _events(raw):
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    message["content"] += delta.get("content") or ""
                    for piece in delta.get("tool_calls") or []:
                        slot = slots.setdefault(
                            int(piece.get("index", 0)),
                            {
                                "id": "",
                                "type": "function",
                                "function": {"name": "", "arguments": ""},
                            },
                        )
                        slot["id"] = piece.get("id") or slot["id"]
                        function = piece.get("function") or {}
                        slot["function"]["name"] += function.get("name") or ""
                        slot["function"]["arguments"] += function.get("arguments") or ""
            if slots:
                message["tool_calls"] = [slots[i] for i in sorted(slots)]
        else:
            message = json.loads(raw)["choices"][0]["message"]
        calls = [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []
        ]
        return str(message.get("content") or ""), calls, message
    if stream:
        output = next(e for e in _events(raw) if e["type"] == "response.completed")["response"][
            "output"
        ]
    else:
        output = json.loads(raw)["output"]
    text = "".join(
        part.get("text", "")
        for item in output
        if item["type"] == "message"
        for part in item["content"]
    )
    calls = [
        (i["call_id"], i["name"], json.loads(i["arguments"]))
        for i in output
        if i["type"] == "function_call"
    ]
    return text, calls, output


_minted = [0]


def _gemini(raw: bytes, stream: bool) -> tuple[str, list[tuple[str, str, dict[str, Any]]], Any]:
    """A Gemini answer; a call without an id gets one made up from the clock, as the Gemini
    CLI does (``<name>_<epoch ms>_<n>``): a different id in every run."""
    chunks = _events(raw) if stream else [json.loads(raw)]
    parts = [
        dict(part)
        for chunk in chunks
        for candidate in (chunk.get("candidates") or [])[:1]
        for part in (candidate.get("content") or {}).get("parts") or []
    ]
    text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str))
    calls = []
    for part in parts:
        call = part.get("functionCall")
        if isinstance(call, dict):
            if not call.get("id"):
                _minted[0] += 1
                call = {**call, "id": f"{call['name']}_{time.time_ns() // 10**6}_{_minted[0]}"}
                part["functionCall"] = call
            calls.append((call["id"], call["name"], call.get("args") or {}))
    merged: list[dict[str, Any]] = []  # streamed text pieces put back into one part
    for part in parts:
        if merged and "text" in part and "text" in merged[-1]:
            merged[-1] = {"text": merged[-1]["text"] + part["text"]}
        else:
            merged.append(part)
    return text, calls, {"role": "model", "parts": merged}


def results(api: str, done: list[tuple[str, str]]) -> list[Any]:
    if api == "gemini":
        responses = [
            {
                "functionResponse": {
                    "id": i,
                    "name": i.rsplit("_", 2)[0],
                    "response": {"output": out},
                }
            }
            for i, out in done
        ]
        return [{"role": "user", "parts": responses}]
    if api == "anthropic":
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": out} for i, out in done]
        return [{"role": "user", "content": blocks}]
    if api == "openai-chat":
        return [{"role": "tool", "tool_call_id": i, "content": out} for i, out in done]
    return [{"type": "function_call_output", "call_id": i, "output": out} for i, out in done]


def converse(
    *,
    api: str,
    base_url: str,
    key: str,
    prompt: str,
    cwd: Path,
    stream: bool = False,
    model: str = "agent-model",
    side: str = "",
    max_turns: int = 40,
    cache_control: bool = False,
) -> Transcript:
    """Run the agent loop to its end (``ApiError`` on an HTTP error answer)."""
    transcript = Transcript()
    headers = {"x-api-key": key} if api == "anthropic" else {"authorization": f"Bearer {key}"}
    if api == "gemini":
        headers = {"x-goog-api-key": key}
    if api == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
    items: list[Any] = [{"role": "user", "content": prompt}]
    if api == "gemini":
        items = [{"role": "user", "parts": [{"text": prompt}]}]
    if cache_control:  # as Claude Code sends a prompt: one text block
        items = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
        for _ in range(max_turns):
            count = {"model": model, "messages": list(items)}
            if side == "before" and api == "anthropic":
                client.post("/v1/messages/count_tokens", json=count)
            aside = None
            if side == "concurrent" and api == "anthropic":
                aside = threading.Thread(
                    target=lambda c=count: httpx.post(
                        f"{base_url}/v1/messages/count_tokens", json=c, headers=headers
                    )
                )
                aside.start()
            body = request_body(api, model, marked(items) if cache_control else items, stream)
            route = GEMINI_STREAM if api == "gemini" and stream else ROUTES[api]
            answer = client.post(route.format(model=model), json=body)
            if aside is not None:
                aside.join()
            if side == "after" and api == "anthropic":
                client.post("/v1/messages/count_tokens", json=count)
            if answer.status_code >= 300:
                raise ApiError(answer.status_code, answer.text)
            transcript.raw.append(answer.content)
            text, calls, assistant = parse(api, answer.content, stream)
            items += assistant if isinstance(assistant, list) else [assistant]
            if not calls:
                transcript.final = text
                return transcript
            done = []
            for call_id, name, args in calls:
                transcript.tools_run.append(name)
                done.append((call_id, run_tool(name, args, cwd)))
            items += results(api, done)
    transcript.final = "gave up"
    return transcript


def marked(items: list[Any]) -> list[Any]:
    """The conversation as Claude Code sends it: the last block of the last message marked
    with ``cache_control`` in this request only (the next one marks its own last)."""
    last = dict(items[-1])
    content = last.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return [*items[:-1], {**last, "content": blocks}]


def request_body(api: str, model: str, items: list[Any], stream: bool) -> dict[str, Any]:
    if api == "gemini":  # the model is in the path, streaming is the route's
        return {
            "contents": items,
            "tools": [{"functionDeclarations": TOOLS}],
            "generationConfig": {"temperature": 0},
        }
    if api == "anthropic":
        tools = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in TOOLS
        ]
        return {
            "model": model,
            "max_tokens": 1024,
            "messages": items,
            "tools": tools,
            "stream": stream,
            "metadata": {"user_id": os.urandom(4).hex()},
        }
    if api == "openai-chat":
        tools = [{"type": "function", "function": t} for t in TOOLS]
        return {"model": model, "messages": items, "tools": tools, "stream": stream}
    tools = [{"type": "function", **t} for t in TOOLS]
    return {
        "model": model,
        "input": items,
        "tools": tools,
        "stream": stream,
        "prompt_cache_key": os.urandom(4).hex(),
    }


def main(argv: list[str]) -> int:
    """``agent_client.py [--api API] [--stream] [--side WHEN] [--config FILE] [PROMPT]``; the
    base URL and key from ``AGENT_BASE_URL``/``AGENT_KEY`` or the variables the generic
    profile sets, or with ``--config`` only from that file (a CLI with a config of its own:
    ``{"base_url": ..., "key_env": "NAME"}``, the key in the variable it names)."""
    env: Mapping[str, str] = os.environ
    api = env.get("AGENT_API", "anthropic")
    stream = env.get("AGENT_STREAM") == "1"
    side = env.get("AGENT_SIDE", "")
    prompt = env.get("AGENT_PROMPT", "go")
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--api":
            api = args.pop(0)
        elif arg == "--stream":
            stream = True
        elif arg == "--side":
            side = args.pop(0)
        elif arg == "--config":
            config = json.loads(Path(args.pop(0)).read_text(encoding="utf-8"))
            env = {"AGENT_BASE_URL": config["base_url"], "AGENT_KEY": env[config["key_env"]]}
        else:
            prompt = arg
    family = {"anthropic": "ANTHROPIC", "gemini": "GOOGLE_GEMINI"}.get(api, "OPENAI")
    base = env.get("AGENT_BASE_URL") or env.get(f"{family}_BASE_URL", "").removesuffix("/v1")
    key_name = "GEMINI_API_KEY" if api == "gemini" else f"{family}_API_KEY"
    key = env.get("AGENT_KEY") or env.get(key_name, "")
    try:
        transcript = converse(
            api=api,
            base_url=base,
            key=key,
            prompt=prompt,
            cwd=Path.cwd(),
            stream=stream,
            model=env.get("AGENT_MODEL", "agent-model"),
            side=side,
            max_turns=int(env.get("AGENT_MAX_TURNS", "40")),
        )
    except ApiError as error:
        print(error.body, file=sys.stderr)
        return 1
    print(transcript.final)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
