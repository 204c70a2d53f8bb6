"""``open_forge()``: turn what a user typed after ``--forge`` into a :class:`Forge`."""

from __future__ import annotations

import os
from pathlib import Path

from assay.errors import BadInput
from assay.forge.base import Forge
from assay.forge.http import HttpForge
from assay.schemes import forge_opener

_URL_SCHEMES = ("file://", "git://", "http://", "https://", "ssh://")
TOKEN_ENV = "ASSAY_FORGE_TOKEN"


def token_config(url: str, token: str | None) -> dict[str, str]:
    """The git config that sends ``token`` to ``url`` (and to nothing else) as
    ``Authorization: Bearer``: ``http.<url>.extraHeader``. Passed to git in its environment
    and read by Assay's own HTTP clients (:func:`assay.forge.lsrefs.extra_headers`), so it
    never reaches a command line or a log."""
    token = (token or "").strip()
    if not token:
        return {}
    return {f"http.{url}.extraHeader": f"Authorization: Bearer {token}"}


def _local_path(raw: str) -> Path:
    path = Path(raw).expanduser().resolve()
    if not ((path / "HEAD").is_file() and (path / "objects").is_dir()):
        raise BadInput(
            f"--forge {raw!r}: no git repository at {path} (make one with `assay forge init {raw}`)"
        )
    return path


def open_forge(
    spec: str | None, *, cache_dir: Path | None = None, token: str | None = None
) -> Forge:
    """Open the forge named by a path, ``file://``, ``git://``, ``http(s)://`` or ``github:``.

    ``None`` or an empty value is bad input naming ``--forge`` and ``ASSAY_FORGE``.
    ``github:OWNER/REPO`` goes to the opener ``assay.github`` registers in
    :mod:`assay.schemes` (importing ``assay.github``, or the CLI, registers it). An
    ``http(s)://`` forge is sent ``token``, else the one in ``$ASSAY_FORGE_TOKEN``, if set
    (a process acting in several roles, as the demo's stage does, names each handle's).
    """
    if spec is None or not spec.strip():
        raise BadInput("no forge given: pass --forge URL_OR_PATH or set ASSAY_FORGE")
    spec = spec.strip()
    opener = forge_opener(spec)
    if opener is not None:
        return opener(spec, cache_dir=cache_dir)
    if spec.startswith("github:"):
        raise BadInput(
            f"--forge {spec!r}: GitHub forges are not available here (import assay.github "
            "to register them)"
        )
    if spec.startswith("file://"):
        path = _local_path(spec[len("file://") :])
        return Forge(f"file://{path}", cache_dir=cache_dir)
    if spec.startswith(("http://", "https://")):
        config = token_config(spec, token or os.environ.get(TOKEN_ENV))
        return HttpForge(spec, cache_dir=cache_dir, config=config)
    if spec.startswith(_URL_SCHEMES):
        return Forge(spec, cache_dir=cache_dir)
    if "://" in spec:
        raise BadInput(
            f"--forge {spec!r}: unknown scheme (use a path, file://, git://, http(s)://, "
            "ssh:// or github:OWNER/REPO)"
        )
    path = _local_path(spec)
    return Forge(f"file://{path}", cache_dir=cache_dir)
