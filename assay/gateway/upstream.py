"""The desk's real model endpoint, as the gateway calls it: the ``model:`` section of the
manifest (base URL, key variable, retries honouring ``retry-after``, price).

The key is read from the desk process's environment at call time and sent in the
upstream's own header (``x-api-key`` for Anthropic, ``Authorization: Bearer`` for OpenAI,
``x-goog-api-key`` for Gemini);
it is never in a journal, a log or the CLI's environment. A response is read whole (a
stream as its raw bytes) so it can be recorded and checked before the CLI sees any of it.

Errors at the boundary are ``assay.models.http.send``'s, the one retry policy and mapping
the model adapters use too: refused credentials -> ``Denied`` (77), 429/5xx/transport
failures that outlast the retries -> ``Unavailable`` (69, with ``capacity=True`` when the
provider is up but full: the desk parks the run as a durable wait instead of giving the
brief back). Here a 404 is ``BadInput`` naming the base URL, and a 2xx body that is not the
API's JSON (or event stream) is ``Unavailable``. Other 4xx answers are the CLI's business
and are returned to it as they came.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx

from assay.errors import BadInput, Unavailable
from assay.gateway.apis import get_api
from assay.gateway.wire import Answer, read_answer
from assay.models.config import AnthropicConfig, GeminiConfig, OpenAIConfig
from assay.models.http import RetryPolicy, send, ssl_context

PASS_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")
DEFAULT_BASE = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, whole: what is recorded and what the CLI is sent."""

    status: int
    content_type: str
    body: bytes
    stream: bool

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class Upstream:
    """Forwards one request to the desk's model endpoint (see the module docstring)."""

    def __init__(
        self,
        config: OpenAIConfig | AnthropicConfig | GeminiConfig,
        *,
        source: str = "the desk",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = config
        self.source = source
        self.flavour = config.adapter
        base = config.base_url or (
            os.environ.get("ASSAY_MODEL_BASE_URL") if config.adapter == "openai" else None
        )
        self.base_url = (base or DEFAULT_BASE[config.adapter]).rstrip("/")
        self.policy = RetryPolicy(config.attempts, config.backoff_s, config.max_backoff_s)
        self._client = httpx.Client(
            timeout=httpx.Timeout(config.timeout_s, connect=min(config.timeout_s, 15.0)),
            transport=transport,
            verify=ssl_context(),
        )

    def close(self) -> None:
        self._client.close()

    def url(self, route: str) -> str:
        """``/v1/messages`` on the configured base; a base already ending in the route's
        version (an OpenAI base's ``/v1``, a Gemini base's ``/v1beta``) is not given it twice."""
        version = "/" + route.lstrip("/").split("/", 1)[0]
        if version.startswith("/v1") and self.base_url.endswith(version):
            return self.base_url + route.removeprefix(version)
        return self.base_url + route

    def headers(self, given: dict[str, str]) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        for name in PASS_HEADERS:
            if name in given:
                headers[name] = given[name]
        key_env = self.config.api_key_env
        key = os.environ.get(key_env) if key_env else None
        if self.flavour == "anthropic":
            assert isinstance(self.config, AnthropicConfig)
            headers.setdefault("anthropic-version", self.config.anthropic_version)
            if key:
                headers["x-api-key"] = key
        elif self.flavour == "gemini":
            if key:
                headers["x-goog-api-key"] = key
        elif key:
            headers["authorization"] = f"Bearer {key}"
        return headers

    def forward(
        self, api: str, route: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[Reply, Answer | None]:
        """POST ``body`` (the desk's model in place of the CLI's, in the body or the path as
        the API has it), retrying what is transient."""
        wire = get_api(api)
        path, payload = wire.upstream_request(route, body, self.config.model)
        stream = wire.streams(route, body)
        what = f"{self.source}: model: {self.config.model} at {self.base_url}"
        response = send(
            self._client,
            self.url(path),
            payload=payload,
            headers=self.headers(headers),
            policy=self.policy,
            what=what,
            key_env=self.config.api_key_env,
        )
        reply = Reply(
            response.status_code,
            response.headers.get("content-type", "application/json"),
            response.content,
            stream and response.status_code < 300,
        )
        return reply, self._check(api, reply, what)

    def _check(self, api: str, reply: Reply, what: str) -> Answer | None:
        if reply.status == 404:
            raise BadInput(f"{what}: no such endpoint (HTTP 404); check model.base_url")
        if not reply.ok:
            return None
        answer = read_answer(api, reply.body, stream=reply.stream)
        if answer is None:
            kind = "event stream" if reply.stream else "JSON"
            raise Unavailable(f"{what}: the answer is not {api} {kind} (HTTP {reply.status})")
        return answer
