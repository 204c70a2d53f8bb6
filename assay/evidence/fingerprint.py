"""The environment fingerprint: what a row's result depends on besides the tree itself.

A fingerprint is a flat ``{key: value}`` map of strings, readable in a diff:

- ``python``: the version of the interpreter the rows get (``python3`` on the rows' PATH);
- ``lock:<path>``: ``sha256:<hex>`` of each lock file the brief's ``env`` names, read from
  the checked-out tree (``missing`` when the commit lacks it);
- ``tool:<name>``: the first line of ``<name> --version`` for each tool the brief lists
  (``missing`` when it is not on PATH).

The desk records the fingerprint it worked in; the gate computes its own on the commit it
checks out, and both are compared with each other and with the brief's declaration.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from assay.errors import BadInput
from assay.evidence.spec import EnvDecl, env_decl

MISSING = "missing"
_PROBE_TIMEOUT_S = 20.0


def _lock_digest(tree: Path, relative: str) -> str:
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or not relative.strip():
        raise BadInput(f"brief env.lock: {relative!r} must be a path inside the repository")
    path = tree.joinpath(*pure.parts)
    if not path.is_file():
        return MISSING
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


# ``--version`` answers of a long-running desk, reused across briefs: the same executable
# file (path and mtime), environment and working directory give the same answer, and a
# probe through a version manager's shim costs a shell and an interpreter start each time.
_PROBED: dict[tuple[Any, ...], str | None] = {}


def _probe(argv: list[str], env: Mapping[str, str]) -> str | None:
    try:
        stamp = os.stat(argv[0]).st_mtime_ns
    except OSError:
        return _run_probe(argv, env)
    key = (tuple(argv), stamp, os.getcwd(), frozenset(env.items()))
    if key not in _PROBED:
        _PROBED[key] = _run_probe(argv, env)
    return _PROBED[key]


def _run_probe(argv: list[str], env: Mapping[str, str]) -> str | None:
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0].strip() if text else ""


def _python_version(env: Mapping[str, str]) -> str:
    path = env.get("PATH", os.defpath)
    for name in ("python3", "python"):
        found = shutil.which(name, path=path)
        if found is None:
            continue
        if os.path.realpath(found) == os.path.realpath(sys.executable):
            return platform.python_version()
        # ``--version`` answers before the interpreter imports anything: cheap to ask.
        answer = _probe([found, "--version"], env) or ""
        version = answer.split()[-1] if answer.lower().startswith("python ") else ""
        if version:
            return version
    return platform.python_version()


def _tool_version(name: str, env: Mapping[str, str]) -> str:
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        return MISSING
    version = _probe([found, "--version"], env)
    return MISSING if version is None else (version or "unknown")


def fingerprint(
    env: Any, tree: Path, *, run_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The fingerprint of ``tree`` and the environment rows get (``run_env``, default ours).

    ``env`` is the brief's environment declaration (an ``EnvSpec``, a mapping, an
    ``EnvDecl`` or None).
    """
    decl = env if isinstance(env, EnvDecl) else env_decl(env)
    environ = dict(os.environ if run_env is None else run_env)
    result: dict[str, str] = {"python": _python_version(environ)}
    for lock in decl.locks:
        result[f"lock:{lock}"] = _lock_digest(tree, lock)
    for tool in sorted(decl.tools):
        result[f"tool:{tool}"] = _tool_version(tool, environ)
    return result


def fingerprint_digest(fp: Mapping[str, str]) -> str:
    """One ``sha256:`` for a whole fingerprint (canonical JSON), for short displays."""
    canonical = json.dumps(dict(fp), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def declaration_problems(env: Any, fp: Mapping[str, str]) -> list[str]:
    """What in ``fp`` contradicts the brief's declaration, one readable line each."""
    decl = env if isinstance(env, EnvDecl) else env_decl(env)
    problems: list[str] = []
    if decl.python:
        have = fp.get("python", MISSING)
        if have != decl.python and not have.startswith(decl.python + "."):
            problems.append(f"python: the brief declares {decl.python}, the environment has {have}")
    for lock in decl.locks:
        if fp.get(f"lock:{lock}", MISSING) == MISSING:
            problems.append(f"lock:{lock}: declared by the brief but missing at this commit")
    for tool, version in sorted(decl.tools.items()):
        have = fp.get(f"tool:{tool}", MISSING)
        if have == MISSING:
            problems.append(f"tool:{tool}: declared by the brief but not on PATH")
        elif version and version not in have:
            problems.append(
                f"tool:{tool}: the brief declares {version}, the environment has {have}"
            )
    return problems


def diff_fingerprints(
    expected: Mapping[str, str],
    actual: Mapping[str, str],
    *,
    left: str = "desk",
    right: str = "gate",
) -> list[str]:
    """A readable diff of two fingerprints: one line per key that differs, empty when equal."""
    lines: list[str] = []
    for key in sorted(set(expected) | set(actual)):
        was = expected.get(key)
        now = actual.get(key)
        if was == now:
            continue
        lines.append(
            f"{key}: {left} {was if was is not None else '(absent)'}"
            f" != {right} {now if now is not None else '(absent)'}"
        )
    return lines
