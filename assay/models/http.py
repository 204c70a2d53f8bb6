"""HTTP for model APIs: one POST with retries on 429/5xx that honour ``retry-after``.

This is the one retry policy and the one mapping of HTTP failures to Assay's errors, for
the model adapters and the agent CLIs' gateway alike (``send``): refused credentials ->
``Denied`` (77); 429/5xx/network failures that outlast the retries -> ``Unavailable`` (69),
with ``capacity=True`` and ``http=<status>`` when the last answer was 429, 503 or 529 (the
provider is up but has no room for the call now, worth a durable wait). Any other answer is
the caller's to read: an adapter refuses other 4xx as ``BadInput`` (65), the gateway hands
them to the CLI. No header value (the API key) ever appears in a message.
"""

from __future__ import annotations

import email.utils
import functools
import math
import os
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import certifi
import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from assay.errors import BadInput, Denied, Unavailable
from assay.models.config import HttpModelConfig

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
# Answers that say the provider is there but has no room for the call now (rate limited,
# unavailable, Anthropic's overloaded): worth waiting for, unlike a broken endpoint.
CAPACITY_STATUSES = frozenset({429, 503, 529})


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One TLS context for every call: building one loads the CA bundle (~100 ms)."""
    return ssl.create_default_context(cafile=certifi.where())


def client(timeout_s: float, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """A fresh client for one call, sharing the process's TLS context."""
    return httpx.Client(timeout=timeout_s, transport=transport, verify=ssl_context())


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts, and the exponential backoff used when no ``retry-after`` came."""

    attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None, status: int = 0) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status  # the HTTP status that asked for the retry; 0: the network


def parse_retry_after(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``/``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _wait(policy: RetryPolicy) -> Any:
    def wait(state: RetryCallState) -> float:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return float(min(exc.retry_after, policy.max_backoff_s))
        delay: float = policy.backoff_s * math.pow(2, state.attempt_number - 1)
        return min(delay, policy.max_backoff_s) * random.uniform(0.5, 1.0)

    return wait


def send(
    client: httpx.Client,
    url: str,
    *,
    payload: dict[str, Any],
    headers: dict[str, str],
    policy: RetryPolicy,
    what: str,
    key_env: str | None = None,
) -> httpx.Response:
    """POST ``payload``, retrying what is transient, and return the answer that ended it.

    Raises ``Denied`` for refused credentials and ``Unavailable`` when the retries run out
    (see the module docstring); every other answer, 4xx included, is returned."""

    def attempt() -> httpx.Response:
        try:
            response = client.post(url, json=payload, headers=headers)
        except httpx.TransportError as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}", None) from exc
        status = response.status_code
        if status in RETRY_STATUSES:
            raise _Retryable(f"HTTP {status}", parse_retry_after(response.headers), status)
        if status in (401, 403):
            hint = f"; check ${key_env}" if key_env else ""
            raise Denied(f"{what}: the endpoint refused the credentials (HTTP {status}){hint}")
        return response

    retrying = Retrying(
        stop=stop_after_attempt(policy.attempts),
        wait=_wait(policy),
        retry=retry_if_exception_type(_Retryable),
        reraise=True,
    )
    try:
        response: httpx.Response = retrying(attempt)
    except _Retryable as exc:
        if exc.status in CAPACITY_STATUSES:
            raise Unavailable(
                f"{what}: no capacity after {policy.attempts} attempts ({exc})",
                capacity=True,
                http=exc.status,
            ) from exc
        raise Unavailable(f"{what}: unreachable after {policy.attempts} attempts ({exc})") from exc
    return response


def post_json(
    client: httpx.Client,
    url: str,
    *,
    payload: dict[str, Any],
    headers: dict[str, str],
    policy: RetryPolicy,
    what: str,
    key_env: str | None = None,
) -> dict[str, Any]:
    """POST ``payload`` and return the JSON object answered; any other 4xx is ``BadInput``."""
    response = send(
        client, url, payload=payload, headers=headers, policy=policy, what=what, key_env=key_env
    )
    status = response.status_code
    if status >= 400:
        raise BadInput(f"{what}: HTTP {status}: {response.text[:300]}")
    try:
        data = response.json()
    except ValueError as exc:
        raise Unavailable(f"{what}: the answer is not JSON (HTTP {status})") from exc
    if not isinstance(data, dict):
        raise Unavailable(f"{what}: the answer is not a JSON object")
    return data


C = TypeVar("C", bound=HttpModelConfig)


class HttpAdapter(Generic[C]):
    """What the HTTP adapters share: their section, the retry policy, the key, one POST."""

    def __init__(
        self, config: C, *, base_url: str, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.config = config
        self.context_window = config.context_window
        self.base_url = base_url.rstrip("/")
        self.policy = RetryPolicy(config.attempts, config.backoff_s, config.max_backoff_s)
        # One client a call: a model call takes seconds, so keep-alive buys nothing, and
        # no adapter holds a socket between steps (or leaks one when a run suspends).
        self._transport = transport

    def _api_key(self) -> str | None:
        """The key from ``$<api_key_env>``, read at call time (None when unset or empty)."""
        key_env = self.config.api_key_env
        return (os.environ.get(key_env) if key_env else None) or None

    def _post(self, path: str, payload: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        with client(self.config.timeout_s, self._transport) as http_client:
            return post_json(
                http_client,
                f"{self.base_url}{path}",
                payload=payload,
                headers=headers,
                policy=self.policy,
                what=f"model {self.config.model} at {self.base_url}",
                key_env=self.config.api_key_env,
            )
