"""The environment a sandboxed process gets: built from scratch, never inherited whole.

A few harmless variables (``BASE_ENV``) plus the names a manifest declares, taken from the
supervisor's environment, minus every name that matches the one credential rule
(``assay.journal.redact.CREDENTIAL_NAME``), every declared secret, and every variable whose
value holds a withheld value (the forge token under whatever name it was given).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from assay.journal.redact import is_credential_name, secret_names

# Enough for compilers and test runners. HOME and TMPDIR are set by the runner (private).
BASE_ENV: tuple[str, ...] = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")


def sandbox_environment(
    declared: Iterable[str] = (),
    *,
    secrets: Iterable[str] = (),
    withheld: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``BASE_ENV`` + ``declared`` from ``source`` (default ours), credential-free, + ``extra``.

    ``secrets`` are variable names that are never passed; ``withheld`` are values no passed
    variable may contain. ``extra`` is set by Assay itself (``ASSAY_BRIEF_FILE``...).
    """
    env_source = os.environ if source is None else source
    refused = set(secret_names(secrets, environ=env_source))
    values = [value for value in withheld if value]
    env: dict[str, str] = {}
    for name in (*BASE_ENV, *declared):
        if name in refused or is_credential_name(name):
            continue
        value = env_source.get(name)
        if value is None or any(secret in value for secret in values):
            continue
        env[name] = value
    env.setdefault("PATH", os.defpath)
    env.setdefault("NO_COLOR", "1")
    env.update(extra or {})
    return env
