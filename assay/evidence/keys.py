"""The gate's signing key pair: where the private half lives, how it is made, how it signs.

Evidence is signed with an Ed25519 key pair. Only the gate holds the private half; the
public half is what everyone else checks a record with (``assay.forge.settings``: the
forge's config records it, so status, the board, a merge and a person verify any record
without holding a secret). The private key is looked up in this order:

1. ``$ASSAY_EVIDENCE_KEY`` (its value is the key's text, ``assay-gate-key:ed25519:…``);
2. the file named by ``$ASSAY_EVIDENCE_KEY_FILE``, read once and then removed (on GitHub a
   step of its own writes the repository secret there, so no environment of the step that
   runs rows, nor of any ancestor, holds it);
3. the key file ``gate.key`` in the gate's state directory: ``$ASSAY_GATE_STATE``, else
   ``~/.local/state/assay-gate``. It is never under ``$ASSAY_STATE`` (the desks' state), never
   inside a forge and never pushed; the directory is made mode 0700 and the file 0600, so
   in a two-user deployment the desks' user cannot read it. ``assay forge init`` creates it.

Running without a key is the explicit ``--insecure-unsigned-evidence`` choice: the gate then
signs nothing and the merge rule accepts unsigned records; the board says so.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from assay.errors import BadInput, Corrupt, Unavailable

KEY_ENV = "ASSAY_EVIDENCE_KEY"
KEY_FILE_ENV = "ASSAY_EVIDENCE_KEY_FILE"
PUBLIC_KEY_ENV = "ASSAY_GATE_PUBLIC_KEY"
GATE_STATE_ENV = "ASSAY_GATE_STATE"
KEY_FILE = "gate.key"
INSECURE_FLAG = "--insecure-unsigned-evidence"
PRIVATE_PREFIX = "assay-gate-key:ed25519:"
PUBLIC_PREFIX = "ed25519:"
SIGNATURE_PREFIX = "ed25519:"
_MAX_KEY_BYTES = 4096


def b64(data: bytes) -> str:
    """``data`` as standard base64 text (every key, signature and sealed field)."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str, *, size: int | None = None) -> bytes | None:
    """The bytes of base64 ``text`` (of exactly ``size`` bytes when given), else None."""
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return data if size is None or len(data) == size else None


def unprefix(text: str, prefix: str, *, size: int) -> bytes | None:
    """The ``size`` bytes of ``<prefix><base64>`` (surrounding space ignored), else None."""
    value = text.strip()
    return unb64(value[len(prefix) :], size=size) if value.startswith(prefix) else None


@dataclass(frozen=True)
class PublicKey:
    """The public half: checks signatures; its ``fingerprint`` names it in every message."""

    raw: bytes

    @classmethod
    def parse(cls, text: str, *, source: str) -> PublicKey:
        """``ed25519:<base64 of 32 bytes>``, else ``BadInput`` naming ``source``."""
        raw = unprefix(text, PUBLIC_PREFIX, size=32)
        if raw is None:
            raise BadInput(
                f"{source}: a gate public key is {PUBLIC_PREFIX}<base64 of 32 bytes>, "
                "as `assay forge gate-key` prints it"
            )
        return cls(raw)

    @property
    def text(self) -> str:
        return PUBLIC_PREFIX + b64(self.raw)

    @property
    def fingerprint(self) -> str:
        """16 hex digits of the key's sha256: short enough to read, long enough to tell."""
        return hashlib.sha256(self.raw).hexdigest()[:16]

    def verifies(self, signature: bytes, payload: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, payload)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class GateKey:
    """The private half: only the gate holds one. ``where`` names it in messages (never
    its value)."""

    seed: bytes = field(repr=False)  # the secret: never in a repr, a log or a traceback
    where: str

    @classmethod
    def generate(cls, where: str) -> GateKey:
        private = Ed25519PrivateKey.generate()
        seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return cls(seed, where)

    @classmethod
    def parse(cls, text: str, *, where: str) -> GateKey:
        seed = unprefix(text, PRIVATE_PREFIX, size=32)
        if seed is None:  # the message never quotes the value: it is a secret
            raise BadInput(
                f"{where}: the gate's key must be one line {PRIVATE_PREFIX}<base64 of 32 bytes> "
                "(`assay forge gate-key` makes one)"
            )
        return cls(seed, where)

    @property
    def text(self) -> str:
        """The secret's text form (the key file's one line, a GitHub secret's value)."""
        return PRIVATE_PREFIX + b64(self.seed)

    @property
    def public(self) -> PublicKey:
        raw = (
            Ed25519PrivateKey.from_private_bytes(self.seed)
            .public_key()
            .public_bytes(Encoding.Raw, PublicFormat.Raw)
        )
        return PublicKey(raw)

    def sign(self, payload: bytes) -> str:
        """``ed25519:<fingerprint>:<base64 signature>``: the signer is named, so a reader
        can say which key signed a record it cannot check."""
        signature = Ed25519PrivateKey.from_private_bytes(self.seed).sign(payload)
        return f"{SIGNATURE_PREFIX}{self.public.fingerprint}:{b64(signature)}"


def split_signature(value: str, *, source: str) -> tuple[str, bytes]:
    """``(fingerprint, signature)`` of a record's ``sig``; ``Corrupt`` naming ``source``."""
    parts = value.split(":")
    signature = unb64(parts[2], size=64) if len(parts) == 3 else None
    fingerprint = parts[1] if len(parts) == 3 else ""
    if (
        signature is None
        or parts[0] + ":" != SIGNATURE_PREFIX
        or len(fingerprint) != 16
        or any(c not in "0123456789abcdef" for c in fingerprint)
    ):
        raise Corrupt(f"{source}: field 'sig' is not ed25519:<fingerprint>:<signature>")
    return fingerprint, signature


def gate_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The gate's own state directory: never the desks' ``$ASSAY_STATE``, never a forge."""
    env = os.environ if environ is None else environ
    explicit = env.get(GATE_STATE_ENV, "").strip()
    if explicit:
        return Path(explicit)
    return Path.home() / ".local" / "state" / "assay-gate"


def key_path(environ: Mapping[str, str] | None = None) -> Path:
    return gate_state_dir(environ) / KEY_FILE


def create_key(directory: Path | None = None) -> Path:
    """Make the key file (mode 0600, its directory 0700) in ``directory`` unless one is
    there; return its path."""
    folder = directory or gate_state_dir()
    path = folder / KEY_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    except OSError as exc:
        raise Unavailable(f"{path}: cannot create the gate's key ({exc.strerror})") from exc
    try:
        os.write(fd, (GateKey.generate(str(path)).text + "\n").encode())
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise Unavailable(f"{path}: cannot write the gate's key ({exc.strerror})") from exc
    os.close(fd)
    return path


def _read_key_file(path: Path) -> GateKey | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_KEY_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Unavailable(f"{path}: cannot read the gate's key ({exc.strerror})") from exc
    if len(data) > _MAX_KEY_BYTES:
        raise BadInput(f"{path}: the gate's key file is over {_MAX_KEY_BYTES} bytes")
    return GateKey.parse(data.decode("utf-8", "replace"), where=str(path))


def read_key_file(directory: Path) -> GateKey:
    """The key in ``directory``'s key file (``BadInput`` when there is none)."""
    key = _read_key_file(directory / KEY_FILE)
    if key is None:
        raise BadInput(f"{directory / KEY_FILE}: no gate key (assay forge gate-key makes one)")
    return key


def gate_key(environ: Mapping[str, str] | None = None, *, create: bool = False) -> GateKey | None:
    """The gate's private key: ``$ASSAY_EVIDENCE_KEY``, else ``$ASSAY_EVIDENCE_KEY_FILE``
    (taken once), else the state directory's key file (made when ``create``)."""
    env = os.environ if environ is None else environ
    value = env.get(KEY_ENV, "")
    where = KEY_ENV
    if not value and env.get(KEY_FILE_ENV):
        from assay.sandbox.shield import take_secret_file

        value = take_secret_file(env[KEY_FILE_ENV])
        where = KEY_FILE_ENV
    if value:
        return GateKey.parse(value, where=where)
    path = key_path(env)
    key = _read_key_file(path)
    if key is None and create:
        create_key(path.parent)
        key = _read_key_file(path)
    return key


def signing_key(*, key: GateKey | None = None, insecure: bool = False) -> GateKey | None:
    """The key the gate signs with: ``None`` only for the explicit insecure mode."""
    if insecure:
        return None
    return key if key is not None else gate_key(create=True)


def public_key_from_env(environ: Mapping[str, str] | None = None) -> PublicKey | None:
    """``$ASSAY_GATE_PUBLIC_KEY``: how a GitHub job is told the key (a repository
    variable), where a ref could be written by any job."""
    env = os.environ if environ is None else environ
    value = env.get(PUBLIC_KEY_ENV, "").strip()
    return PublicKey.parse(value, source=PUBLIC_KEY_ENV) if value else None
