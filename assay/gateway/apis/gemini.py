"""Google's Gemini API (``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent?alt=sse``, ``:countTokens``): the Gemini CLI.

The model is in the path, not the body: the upstream's path carries the desk's model instead
(``upstream_request``), and whether a call streams is the route's, not a body field. The
conversation is ``contents`` (``role`` user or model, each with ``parts``); a tool call is a
``functionCall`` part of a model turn, its result a ``functionResponse`` part of the next
user turn. The API need not give a call an id; the Gemini CLI then mints one from the clock
(``<tool>_<epoch ms>_<n>``), so such ids are volatile, and calls are paired with results by
id when both carry one, else by name in order. The key comes in ``x-goog-api-key``.
"""

from __future__ import annotations

import re
from typing import Any

from assay.gateway.apis.base import (
    Answer,
    ItemTools,
    RoutePattern,
    Said,
    ToolUse,
    WireApi,
    as_int,
    call_of,
)
from assay.gateway.volatile import Mask, mask_text

_PREFIX = r"/v1(?:beta|alpha)?/models/(?P<model>[^/:]+)"
_SHOWN = "/v1beta/models/{model}:"
# An id the Gemini CLI made up for a call the API gave none (its clock and a counter), or
# the one its context manager synthesises: different in every run of the same step.
MINTED_ID = re.compile(r"(?:[\w.-]+_\d{13}_\d+|synth_.*)")
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def _parts(item: Any) -> list[dict[str, Any]]:
    parts = item.get("parts") if isinstance(item, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


class GeminiApi(WireApi):
    name = "gemini"
    title = "the Gemini API"
    adapter = "gemini"
    routes = (
        RoutePattern(
            re.compile(_PREFIX + ":generateContent"), False, False, _SHOWN + "generateContent"
        ),
        RoutePattern(
            re.compile(_PREFIX + ":streamGenerateContent"),
            True,
            False,
            _SHOWN + "streamGenerateContent",
        ),
        RoutePattern(re.compile(_PREFIX + ":countTokens"), False, True, _SHOWN + "countTokens"),
    )
    family = re.compile(r"/v1(?:beta|alpha)?/(?:models|tunedModels|cachedContents|files)\b")
    conversation_key = "contents"
    markers = ()  # Gemini's context cache is a separate resource, not a mark on an item
    volatile_top = ()
    auth_headers = ("x-goog-api-key", "authorization")

    def upstream_request(
        self, route: str, body: dict[str, Any], model: str
    ) -> tuple[str, dict[str, Any]]:
        found = self.route_of(route)
        match = found.pattern.fullmatch(route) if found is not None else None
        if match is None:
            return route, body
        path = route[: match.start("model")] + model + route[match.end("model") :]
        return path + ("?alt=sse" if found is not None and found.stream else ""), body

    def normalise_rest(self, body: dict[str, Any]) -> dict[str, Any]:
        """The ids the CLI minted for calls the API gave none taken out of every call and
        result part (they are volatile; pairing does not need them)."""
        contents = body.get("contents")
        if not isinstance(contents, list):
            return body
        body["contents"] = [_without_minted_ids(item) for item in contents]
        return body

    def steady_results(self, item: Any, found: tuple[Mask, ...]) -> Any:
        if not any("functionResponse" in part for part in _parts(item)):
            return item
        parts = []
        for part in item["parts"]:
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if isinstance(response, dict) and isinstance(response.get("response"), dict):
                values = {
                    k: mask_text(v, found) if isinstance(v, str) else v
                    for k, v in response["response"].items()
                }
                part = {**part, "functionResponse": {**response, "response": values}}
            parts.append(part)
        return {**item, "parts": parts}

    def with_steering(self, items: list[Any], text: str) -> list[Any]:
        items = list(items)  # a shallow copy: the last user turn is replaced, not changed
        last = items[-1] if items else None
        if isinstance(last, dict) and last.get("role") == "user":
            items[-1] = {**last, "parts": [*_parts(last), {"text": text}]}
            return items
        return [*items, {"role": "user", "parts": [{"text": text}]}]

    def read_answer(self, objects: list[dict[str, Any]]) -> Answer:
        in_t = out_t = 0
        model = ""
        tools: list[ToolUse] = []
        for obj in objects:
            usage = obj.get("usageMetadata")
            if isinstance(usage, dict):
                in_t = max(in_t, as_int(usage.get("promptTokenCount")))
                out = as_int(usage.get("candidatesTokenCount"))
                out_t = max(out_t, out + as_int(usage.get("thoughtsTokenCount")))
            if "totalTokens" in obj:  # countTokens
                in_t = as_int(obj.get("totalTokens"))
            model = str(obj.get("modelVersion") or model)
            for part in _candidate_parts(obj):
                call = part.get("functionCall")
                if isinstance(call, dict):
                    name = str(call.get("name") or "")
                    tools.append(ToolUse(str(call.get("id") or name), name))
        return Answer(in_t, out_t, model, tuple(tools))

    def said(self, objects: list[dict[str, Any]]) -> Said:
        """Each chunk's first candidate's parts, in order (thoughts left out)."""
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        for obj in objects:
            for part in _candidate_parts(obj):
                if isinstance(part.get("text"), str) and not part.get("thought"):
                    text.append(part["text"])
                call = part.get("functionCall")
                if isinstance(call, dict):
                    calls.append(call_of(call.get("name"), call.get("args")))
        return Said(text="".join(text), calls=tuple(calls))

    def tool_pairs(
        self, items: list[Any], *, tools: list[ItemTools] | None = None
    ) -> list[dict[str, Any]]:
        """Calls and results paired by id when both have one, else by name in order; a
        call's id is its place in the conversation (``name@turn.part``), which stays the
        same from one request to the next. Read from the items themselves (an id depends
        on the place): ``tools`` is not used."""
        pending: list[tuple[Any, dict[str, Any]]] = []  # (the id sent, the call)
        done: list[dict[str, Any]] = []
        for n, item in enumerate(items):
            for k, part in enumerate(_parts(item)):
                call = part.get("functionCall")
                if isinstance(call, dict):
                    name = str(call.get("name"))
                    entry = {"id": f"{name}@{n}.{k}", "name": name, "input": call.get("args")}
                    pending.append((call.get("id"), entry))
                response = part.get("functionResponse")
                if not isinstance(response, dict):
                    continue
                sent, name = response.get("id"), str(response.get("name"))
                match = next((p for p in pending if sent and p[0] == sent), None) or next(
                    (p for p in pending if p[1]["name"] == name), None
                )
                if match is None:
                    continue
                pending.remove(match)
                output = response.get("response")
                failed = isinstance(output, dict) and "error" in output and "output" not in output
                if isinstance(output, dict) and set(output) <= {"output", "error"}:
                    output = output.get("output", output.get("error"))
                done.append({**match[1], "output": output, "error": failed})
        return done

    def error_body(self, kind: str, message: str, status: int) -> dict[str, Any]:
        """Google's error shape (the Gemini CLI prints ``error.message``)."""
        name = STATUS_NAMES.get(status, "UNKNOWN")
        return {"error": {"code": status, "message": message, "status": name}}


def _candidate_parts(obj: dict[str, Any]) -> list[dict[str, Any]]:
    candidates = obj.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    return _parts(first.get("content") if isinstance(first, dict) else None)


def _without_minted_ids(item: Any) -> Any:
    if not any(_minted(part) for part in _parts(item)):
        return item
    parts = []
    for part in item["parts"]:
        if isinstance(part, dict) and _minted(part):
            key = "functionCall" if "functionCall" in part else "functionResponse"
            part = {**part, key: {k: v for k, v in part[key].items() if k != "id"}}
        parts.append(part)
    return {**item, "parts": parts}


def _minted(part: dict[str, Any]) -> bool:
    for key in ("functionCall", "functionResponse"):
        value = part.get(key)
        if isinstance(value, dict) and isinstance(value.get("id"), str):
            return bool(MINTED_ID.fullmatch(value["id"]))
    return False
