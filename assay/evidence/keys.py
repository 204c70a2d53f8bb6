"""The gate's signing key: where it lives, how it is made, and how the gate finds it.

Evidence is authenticated by default: every record the gate writes carries an HMAC by a key
that only the gate holds, and a merge counts only records whose signature verifies. The key
is looked up in this order:

1. ``$ASSAY_EVIDENCE_KEY`` (its value is the key);
2. the file named by ``$ASSAY_EVIDENCE_KEY_FILE``, read once and then removed (on GitHub a
   step of its own writes the repository secret there, so no environment of the step that
   runs rows, nor of any ancestor, holds it);
3. the key file ``evidence.key`` in the gate's state directory: ``$ASSAY_GATE_STATE``, else
   ``$ASSAY_STATE/gate``, else ``~/.local/state/assay/gate``. It is outside every forge
   and never pushed. ``assay forge init`` creates it; a gate that finds none creates one the
   first time it verifies or merges (an unsigned record never counts; one whose signature
   fails under this key is corrupt, so every gate of a forge must share one key).

Running without a key is the explicit ``--insecure-unsigned-evidence`` choice: the gate then
signs nothing and the merge rule accepts unsigned records; the board says so.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from assay.errors import BadInput, Unavailable

KEY_ENV = "ASSAY_EVIDENCE_KEY"
KEY_FILE_ENV = "ASSAY_EVIDENCE_KEY_FILE"
GATE_STATE_ENV = "ASSAY_GATE_STATE"
KEY_FILE = "evidence.key"
INSECURE_FLAG = "--insecure-unsigned-evidence"
_MIN_KEY_CHARS = 16
_MAX_KEY_BYTES = 4096


def gate_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The gate's own state directory (never inside a forge, never pushed)."""
    env = os.environ if environ is None else environ
    explicit = env.get(GATE_STATE_ENV, "").strip()
    if explicit:
        return Path(explicit)
    state = env.get("ASSAY_STATE", "").strip()
    if state:
        return Path(state) / "gate"
    return Path.home() / ".local" / "state" / "assay" / "gate"


def key_path(environ: Mapping[str, str] | None = None) -> Path:
    return gate_state_dir(environ) / KEY_FILE


def create_key(directory: Path | None = None) -> Path:
    """Make the key file (mode 0600) in ``directory`` unless one is there; return its path."""
    path = (directory or gate_state_dir()) / KEY_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    except OSError as exc:
        raise Unavailable(f"{path}: cannot create the gate's key ({exc.strerror})") from exc
    try:
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise Unavailable(f"{path}: cannot write the gate's key ({exc.strerror})") from exc
    os.close(fd)
    return path


def _read_key_file(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_KEY_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Unavailable(f"{path}: cannot read the gate's key ({exc.strerror})") from exc
    key = data.strip()
    # The message never quotes the file: it is a secret.
    if len(data) > _MAX_KEY_BYTES or len(key) < _MIN_KEY_CHARS:
        raise BadInput(
            f"{path}: the gate's key file must hold one key of {_MIN_KEY_CHARS} to "
            f"{_MAX_KEY_BYTES} characters"
        )
    return key


def gate_key(environ: Mapping[str, str] | None = None, *, create: bool = False) -> bytes | None:
    """The gate's key: ``$ASSAY_EVIDENCE_KEY``, else ``$ASSAY_EVIDENCE_KEY_FILE`` (taken
    once), else the state directory's key file (made when ``create``)."""
    env = os.environ if environ is None else environ
    value = env.get(KEY_ENV, "")
    if not value and env.get(KEY_FILE_ENV):
        from assay.sandbox.shield import take_secret_file

        value = take_secret_file(env[KEY_FILE_ENV])
    if value:
        return value.encode()
    path = key_path(env)
    key = _read_key_file(path)
    if key is None and create:
        create_key(path.parent)
        key = _read_key_file(path)
    return key


def signing_key(*, key: bytes | None = None, insecure: bool = False) -> bytes | None:
    """The key the gate signs and checks with: ``None`` only for the explicit insecure mode."""
    if insecure:
        return None
    return key if key is not None else gate_key(create=True)
