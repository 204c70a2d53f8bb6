"""The environment a sandboxed process gets: built from scratch, never inherited whole.

A few harmless variables (``BASE_ENV``) plus the names a manifest declares, taken from the
supervisor's environment, minus every name that matches the one credential rule
(``assay.journal.redact.CREDENTIAL_NAME``), every declared secret, and every variable whose
value holds a withheld value (the forge token under whatever name it was given); from
``PATH``, only the folders that hold one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from assay.journal.redact import is_credential_name, secret_names
from assay.sandbox.bwrap import HOME, toolchain_path
from assay.sandbox.spec import SandboxSpec

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
        if value is not None and name == "PATH":
            env[name] = without_withheld_folders(value, values)
        elif value is not None and not any(secret in value for secret in values):
            env[name] = value
    env.setdefault("PATH", os.defpath)
    env.setdefault("NO_COLOR", "1")
    env.update(extra or {})
    return env


def process_environment(spec: SandboxSpec, env: Mapping[str, str]) -> dict[str, str]:
    """What a process started in ``spec`` with ``env`` really gets: isolated, a private
    ``HOME`` and ``TMPDIR`` and the declared toolchains first on ``PATH`` (so ``python`` is
    the supervisor's interpreter, not a shim that is not mounted). The one rule: the runner
    starts processes with it, and the gate fingerprints the rows' environment with it."""
    environment = dict(env)
    if spec.isolation == "on":
        environment.update(HOME=HOME, TMPDIR="/tmp")
        environment["PATH"] = toolchain_path(spec.toolchains, environment.get("PATH", os.defpath))
    return environment


def without_withheld_folders(path: str, withheld: Iterable[str]) -> str:
    """``path`` (a ``PATH`` value) without the folders whose names hold a withheld value.

    ``PATH`` is never dropped whole: a process without one runs whatever ``os.defpath``
    finds, another interpreter than the one the supervisor chose.
    """
    values = [value for value in withheld if value]
    folders = path.split(os.pathsep)
    return os.pathsep.join(f for f in folders if not any(value in f for value in values))
