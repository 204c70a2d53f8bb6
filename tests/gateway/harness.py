"""Drive the gateway in-process: a real ``Run`` on the test's thread, the agent client in
another thread speaking HTTP to a real ``Gateway``, a real scripted upstream behind it."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import AssayError
from assay.gateway.calls import CallHandler
from assay.gateway.server import Gateway
from assay.gateway.upstream import Upstream
from assay.models.config import AnthropicConfig, GeminiConfig, OpenAIConfig, Price
from assay.runtime import Budget, Run
from assay.runtime.wire import WireSession
from tests.fakes.wire import WireFake
from tests.gateway.agent_client import Transcript, converse

KEY_ENV = "ASSAY_GW_TEST_KEY"
KEY = "sk-upstream-real-key-7f3a9c2e41d8"
APIS = ("anthropic", "openai-chat", "openai-responses", "gemini")
PRICE = Price(in_per_1k=1.0, out_per_1k=2.0)


def model_config(api: str, fake: WireFake) -> AnthropicConfig | OpenAIConfig | GeminiConfig:
    common: dict[str, Any] = {
        "model": "upstream-model",
        "api_key_env": KEY_ENV,
        "attempts": 2,
        "backoff_s": 0,
        "price": PRICE,
    }
    if api == "anthropic":
        return AnthropicConfig(adapter="anthropic", base_url=fake.url, **common)
    if api == "gemini":
        return GeminiConfig(adapter="gemini", base_url=fake.url, **common)
    return OpenAIConfig(adapter="openai", base_url=f"{fake.url}/v1", **common)


@dataclass
class Outcome:
    transcript: Transcript | None
    client_error: Exception | None
    error: AssayError | None
    handler: CallHandler
    token: str


def drive(
    journal: Path,
    fake: WireFake,
    *,
    api: str,
    cwd: Path,
    stream: bool = False,
    on_divergence: str = "fail",
    budget: Budget | None = None,
    declared: tuple[str, ...] = ("Write", "Bash"),
    side: str = "",
    max_turns: int = 40,
    cache_control: bool = False,
) -> Outcome:
    """One CLI session against ``journal`` (resumed when it holds one)."""
    config = model_config(api, fake)
    cwd.mkdir(parents=True, exist_ok=True)
    run = Run.open(journal, budget=budget, secrets=[KEY], on_divergence=on_divergence)  # type: ignore[arg-type]
    upstream = Upstream(config, source="desks/cli.yaml")
    handler: CallHandler
    session = WireSession(run, difference=lambda rec, req: handler.difference(rec, req))
    handler = CallHandler(session, upstream, price=PRICE, allowed=lambda name: name in declared)
    box: dict[str, Any] = {}
    error: AssayError | None = None
    with Gateway() as gateway:

        def client() -> None:
            try:
                box["t"] = converse(
                    api=api,
                    base_url=gateway.url,
                    key=gateway.token,
                    prompt="make the thing",
                    cwd=cwd,
                    stream=stream,
                    side=side,
                    max_turns=max_turns,
                    cache_control=cache_control,
                )
            except Exception as exc:  # the test inspects it
                box["e"] = exc

        thread = threading.Thread(target=client, daemon=True)
        thread.start()
        while thread.is_alive() or not gateway.calls.empty():
            try:
                call = gateway.calls.get(timeout=0.05)
            except queue.Empty:
                continue
            try:
                handler.handle(call)
            except AssayError as exc:
                error = exc
                break
        thread.join(30)
        if error is None:
            try:
                session.close()
            except AssayError as exc:
                error = exc
        token = gateway.token
    run.close()
    upstream.close()
    return Outcome(box.get("t"), box.get("e"), error, handler, token)
