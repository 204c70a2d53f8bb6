"""The registry of wire APIs the gateway serves: one ``WireApi`` subclass per API
(``base.py`` says what each knows), looked up by name or by the path a request came on.

The gateway's server routes with ``resolve``, its calls and upstream go through the API's
methods (``assay.gateway.wire`` names them for the rest of Assay), a profile's and a cli
desk's ``api`` is one of ``API_NAMES``, the journal's recorded ``api`` is read back with
``get_api``, and the scripted upstream (``assay.demo.upstream``) answers each API's routes.
Adding an API is one module here and one entry in ``REGISTRY``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, get_args

from assay.errors import BadInput
from assay.gateway.apis.anthropic import AnthropicApi
from assay.gateway.apis.base import Answer, ItemTools, RoutePattern, Said, ToolUse, WireApi
from assay.gateway.apis.gemini import GeminiApi
from assay.gateway.apis.openai import OpenAIChatApi, OpenAIResponsesApi

ApiName = Literal["anthropic", "openai-chat", "openai-responses", "gemini"]
API_NAMES: tuple[ApiName, ...] = get_args(ApiName)

REGISTRY: Mapping[str, WireApi] = MappingProxyType(
    {api.name: api for api in (AnthropicApi(), OpenAIChatApi(), OpenAIResponsesApi(), GeminiApi())}
)
assert tuple(REGISTRY) == API_NAMES, "ApiName and REGISTRY name the same APIs"


def get_api(name: str) -> WireApi:
    """The API called ``name``; ``BadInput`` naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise BadInput(f"unknown wire API {name!r} (known: {', '.join(API_NAMES)})") from None


def resolve(path: str) -> WireApi | None:
    """The API one of whose routes ``path`` is (a POST), or None."""
    return next((api for api in REGISTRY.values() if api.route_of(path) is not None), None)


def no_route(method: str, path: str) -> tuple[WireApi | None, str]:
    """``(the API the path belongs to, or None, the message)`` for a request no route serves:
    a path of an API's shape on the wrong method, or an API route the gateway lacks (the
    Gemini CLI's ``embedContent``), names the API; anything else lists the routes served."""
    for api in REGISTRY.values():
        if api.route_of(path) is not None or api.looks_like(path):
            served = ", ".join(api.served())
            return api, (
                f"no gateway route for {method} {path}: the desk's CLI speaks {api.title} "
                f"(`cli.api: {api.name}`), of which the gateway serves POST {served}"
            )
    served = ", ".join(f"POST {r}" for api in REGISTRY.values() for r in api.served())
    return None, f"no gateway route for {method} {path}: the gateway serves {served}"


__all__ = [
    "API_NAMES",
    "REGISTRY",
    "Answer",
    "ApiName",
    "ItemTools",
    "RoutePattern",
    "Said",
    "ToolUse",
    "WireApi",
    "get_api",
    "no_route",
    "resolve",
]
