"""Model adapters behind one small interface (see ``assay.models.base``).

``build_model(config, base_dir=...)`` turns a desk manifest's ``model:`` section into an
adapter: ``openai`` (any OpenAI-compatible endpoint), ``anthropic`` (Messages API),
``gemini`` (Google's Gemini API), ``command`` (an external agent CLI run as one step) or
``scripted`` (a YAML script).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from assay.briefs.yamldoc import describe, format_path
from assay.errors import BadInput
from assay.models.base import Message, ModelAdapter, ModelReply, ToolSpec, Usage, estimate_tokens
from assay.models.config import (
    MODEL_CONFIG,
    AnthropicConfig,
    AnyModelConfig,
    CommandConfig,
    GeminiConfig,
    ModelConfig,
    OpenAIConfig,
    Price,
    ScriptedConfig,
)

if TYPE_CHECKING:  # httpx costs ~0.1 s to import; only the HTTP adapters need it at run time
    import httpx

    from assay.sandbox import SandboxSpec


def parse_model_config(config: Any, *, source: str = "model") -> AnyModelConfig:
    """Validate a ``model:`` mapping; ``BadInput`` names the field."""
    if isinstance(
        config, OpenAIConfig | AnthropicConfig | GeminiConfig | CommandConfig | ScriptedConfig
    ):
        return config
    if isinstance(config, BaseModel):
        config = config.model_dump()
    try:
        return MODEL_CONFIG.validate_python(config)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = [p for p in first["loc"] if isinstance(p, str | int)]
        if loc and isinstance(config, dict) and loc[0] == config.get("adapter"):
            loc = loc[1:]  # the union's tag, not a field
        where = f"{source}.{format_path(loc)}" if loc else source
        raise BadInput(f"{where}: {describe(first['type'], first['msg'])}") from None


def build_model(
    config: Any,
    *,
    base_dir: Path,
    workdir: Path | None = None,
    transport: httpx.BaseTransport | None = None,
    sandbox: SandboxSpec | None = None,
) -> ModelAdapter:
    """The adapter for ``config`` (a validated config or a plain mapping).

    ``base_dir`` anchors relative paths (a scripted model's script); ``workdir`` is where a
    ``command`` model runs (the brief's work tree; ``base_dir`` when not given), in the
    ``sandbox`` given (the desk's; default: no network) with ``base_dir`` read-only;
    ``transport`` lets tests route HTTP adapters through an in-process transport.
    """
    parsed = parse_model_config(config)
    if isinstance(parsed, OpenAIConfig):
        from assay.models.openai import OpenAIModel

        return OpenAIModel(parsed, transport=transport)
    if isinstance(parsed, AnthropicConfig):
        from assay.models.anthropic import AnthropicModel

        return AnthropicModel(parsed, transport=transport)
    if isinstance(parsed, GeminiConfig):
        from assay.models.gemini import GeminiModel

        return GeminiModel(parsed, transport=transport)
    if isinstance(parsed, CommandConfig):
        from assay.models.command import CommandModel

        return CommandModel(
            parsed, workdir=workdir or base_dir, sandbox=sandbox, program_dir=base_dir
        )
    from assay.models.scripted import ScriptedModel

    return ScriptedModel(parsed, base_dir=base_dir)


__all__ = [
    "AnthropicConfig",
    "CommandConfig",
    "GeminiConfig",
    "Message",
    "ModelAdapter",
    "ModelConfig",
    "ModelReply",
    "OpenAIConfig",
    "Price",
    "ScriptedConfig",
    "ToolSpec",
    "Usage",
    "build_model",
    "estimate_tokens",
    "parse_model_config",
]
