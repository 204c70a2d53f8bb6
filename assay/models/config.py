"""The ``model:`` section of a desk manifest: which adapter, and how to reach it.

```yaml
model: {adapter: openai, model: gpt-4o-mini, base_url: http://127.0.0.1:8000/v1,
        api_key_env: OPENAI_API_KEY, price: {in_per_1k: 0.00015, out_per_1k: 0.0006}}
model: {adapter: anthropic, model: claude-sonnet-4-5, max_tokens: 4096}
model: {adapter: gemini, model: gemini-2.5-pro, api_key_env: GEMINI_API_KEY}
model: {adapter: command, argv: [my-agent, --non-interactive], prompt: stdin}
model: {adapter: scripted, script: scripts/example.yaml}
```

One pydantic model per adapter, discriminated by ``adapter``; unknown fields are refused.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, TypeAdapter, field_validator

from assay.briefs.format import StrictModel


class Price(StrictModel):
    """Dollars per 1,000 tokens, each way; used for the cost estimate of every call."""

    in_per_1k: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] = 0.0
    out_per_1k: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] = 0.0

    def usd(self, in_tokens: int, out_tokens: int) -> float:
        return round(in_tokens / 1000 * self.in_per_1k + out_tokens / 1000 * self.out_per_1k, 8)


class HttpModelConfig(StrictModel):
    """What every HTTP adapter's section has (``assay.models.http.HttpAdapter`` reads it)."""

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    context_window: Annotated[int, Field(gt=0, le=10**9)] = 128_000
    max_tokens: Annotated[int, Field(gt=0, le=10**9)] | None = None
    temperature: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)] | None = None
    timeout_s: Annotated[float, Field(gt=0, le=86400, allow_inf_nan=False)] = 120.0
    attempts: Annotated[int, Field(ge=1, le=20)] = 5
    backoff_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] = 1.0
    max_backoff_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] = 60.0
    # A cli desk whose upstream still answers 429/503/529 after the retries waits this long
    # (durably, holding no process), then twice as long each time, up to an hour.
    capacity_wait_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = 60.0
    price: Price = Field(default_factory=Price)

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/") if value else value


class OpenAIConfig(HttpModelConfig):
    """Any OpenAI-compatible chat-completions endpoint with tool calling."""

    adapter: Literal["openai"]
    api_key_env: str | None = "OPENAI_API_KEY"


class AnthropicConfig(HttpModelConfig):
    """The Anthropic Messages API."""

    adapter: Literal["anthropic"]
    api_key_env: str | None = "ANTHROPIC_API_KEY"
    context_window: Annotated[int, Field(gt=0, le=10**9)] = 200_000
    max_tokens: Annotated[int, Field(gt=0, le=10**9)] | None = 4096
    anthropic_version: str = "2023-06-01"


class GeminiConfig(HttpModelConfig):
    """Google's Gemini API (``generateContent``); the upstream of a cli desk whose CLI speaks
    it (the Gemini CLI). The key is sent in ``x-goog-api-key``."""

    adapter: Literal["gemini"]
    api_key_env: str | None = "GEMINI_API_KEY"
    context_window: Annotated[int, Field(gt=0, le=10**9)] = 1_000_000


def _argv(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"not a valid command line: {exc}") from None
    return value


class CommandConfig(StrictModel):
    """An external agent CLI run as one step; the prompt goes on stdin or in a file.

    With ``prompt: file`` an argv element exactly ``{prompt_file}`` is replaced by the
    file's path (appended when absent). Nothing is ever passed through a shell.
    """

    adapter: Literal["command"]
    argv: Annotated[list[str], BeforeValidator(_argv)]
    prompt: Literal["stdin", "file"] = "stdin"
    timeout_s: Annotated[float, Field(gt=0, le=86400, allow_inf_nan=False)] = 1800.0
    env: list[str] = Field(default_factory=list)
    context_window: Annotated[int, Field(gt=0, le=10**9)] = 200_000
    max_output_bytes: Annotated[int, Field(gt=0, le=64 * 1024 * 1024)] = 200_000

    @field_validator("argv")
    @classmethod
    def _check_argv(cls, value: list[str]) -> list[str]:
        if not value or not value[0]:
            raise ValueError("argv must name a program")
        return value


class ScriptedConfig(StrictModel):
    """A YAML file of responses, for offline demos, tests and benchmarks."""

    adapter: Literal["scripted"]
    script: str
    context_window: Annotated[int, Field(gt=0, le=10**9)] = 1_000_000
    delay_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] = 0.0
    price: Price = Field(default_factory=Price)


AnyModelConfig = OpenAIConfig | AnthropicConfig | GeminiConfig | CommandConfig | ScriptedConfig
ModelConfig = Annotated[AnyModelConfig, Field(discriminator="adapter")]
MODEL_CONFIG: TypeAdapter[AnyModelConfig] = TypeAdapter(ModelConfig)
