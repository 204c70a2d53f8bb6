"""Secret redaction: the values of configured secret variables never reach a line or blob.

Redaction is structural for entries (every string, key or value, is scrubbed; numbers and
the JSON punctuation are untouched, so a short secret cannot break a line) and bytewise for
raw blob payloads.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
SECRET_ENV_VAR = "ASSAY_SECRET_ENV"


def secrets_from_env(
    names: Iterable[str] = (), *, environ: dict[str, str] | None = None
) -> list[str]:
    """Values of the named variables plus those named in ``$ASSAY_SECRET_ENV`` (comma list)."""
    env = dict(os.environ) if environ is None else environ
    wanted = [n.strip() for n in names if n.strip()]
    wanted += [n.strip() for n in env.get(SECRET_ENV_VAR, "").split(",") if n.strip()]
    return [env[name] for name in wanted if env.get(name)]


class Redactor:
    """Replaces every occurrence of any secret value; longest secrets first."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._bytes = [s.encode("utf-8") for s in self.secrets]

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def data(self, value: bytes) -> bytes:
        for secret in self._bytes:
            if secret in value:
                value = value.replace(secret, REDACTED.encode("ascii"))
        return value

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string scrubbed."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value
