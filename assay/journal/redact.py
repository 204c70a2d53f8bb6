"""Secret redaction: the values of configured secret variables never reach a line or blob.

Redaction is structural for entries (every string, key or value, is scrubbed; numbers and
the JSON punctuation are untouched, so a short secret cannot break a line) and bytewise for
raw blob payloads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
SECRET_ENV_VAR = "ASSAY_SECRET_ENV"
MIN_PATTERN_SECRET = 8

# The one rule for "this variable holds a credential", used by redaction, the sandbox's
# environment, rows and the checkpoint scan. AUTHOR is git's identity, not a credential.
CREDENTIAL_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE|"
    r"_KEY$|^KEY$|AUTH(?!OR)|COOKIE|SESSION",
    re.IGNORECASE,
)


def is_credential_name(name: str) -> bool:
    """Whether a variable's name says it holds a credential (``ASSAY_MODEL_API_KEY``...)."""
    return bool(CREDENTIAL_NAME.search(name))


def secret_names(
    names: Iterable[str] = (), *, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The variables that count as secrets: ``names``, those named in ``$ASSAY_SECRET_ENV``
    (comma list) and every variable whose name matches ``CREDENTIAL_NAME``."""
    env = os.environ if environ is None else environ
    wanted = [n.strip() for n in names if n.strip()]
    wanted += [n.strip() for n in env.get(SECRET_ENV_VAR, "").split(",") if n.strip()]
    wanted += [n for n in env if is_credential_name(n) and n != SECRET_ENV_VAR]
    return list(dict.fromkeys(wanted))


def secrets_from_env(
    names: Iterable[str] = (), *, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The values of ``secret_names``: declared ones whatever their length, pattern-matched
    ones from ``MIN_PATTERN_SECRET`` characters (scrubbing "1" would mangle every line)."""
    env = os.environ if environ is None else environ
    declared = {n.strip() for n in names if n.strip()}
    declared |= {n.strip() for n in env.get(SECRET_ENV_VAR, "").split(",") if n.strip()}
    values = [
        env[name]
        for name in secret_names(names, environ=env)
        if env.get(name) and (name in declared or len(env[name]) >= MIN_PATTERN_SECRET)
    ]
    return list(dict.fromkeys(values))


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
