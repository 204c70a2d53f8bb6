"""Run inside mini-swe-agent's venv (which has the official ``openai`` SDK): call the fake at
argv[1] through the SDK's Chat Completions and Responses clients, streamed and not, and print
what the SDK parsed as one JSON object. The SDK, not this test, decides if the wire is right."""

import json
import sys

from openai import OpenAI

client = OpenAI(base_url=sys.argv[1], api_key="t", max_retries=0)
tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
out = {}
chat = client.chat.completions.create(
    model="m", messages=[{"role": "user", "content": "x"}], tools=tools
)
out["chat"] = chat.model_dump()
calls, text = {}, ""
stream = client.chat.completions.create(
    model="m",
    messages=[{"role": "user", "content": "x"}],
    tools=tools,
    stream=True,
    stream_options={"include_usage": True},
)
for chunk in stream:
    if chunk.usage:
        out["chat_stream_usage"] = chunk.usage.total_tokens
    for choice in chunk.choices:
        text += choice.delta.content or ""
        for call in choice.delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"name": "", "arguments": ""})
            entry["name"] += (call.function.name or "") if call.function else ""
            entry["arguments"] += (call.function.arguments or "") if call.function else ""
        if choice.finish_reason:
            out["chat_stream_finish"] = choice.finish_reason
out["chat_stream"] = {"text": text, "calls": list(calls.values())}
rtools = [{"type": "function", "name": "bash", "parameters": {"type": "object"}}]
response = client.responses.create(model="m", input="x", tools=rtools)
out["responses"] = response.model_dump()
with client.responses.stream(model="m", input="x", tools=rtools) as events:
    kinds = [event.type for event in events]
    final = events.get_final_response()
out["responses_stream"] = {"kinds": kinds, "final": final.model_dump()}
print(json.dumps(out))
