"""Holdout rows: acceptance rows a brief's author adds and the desk never sees.

A holdout row is a command and the files it needs, sealed to the gate's holdout public key
and stored on ``refs/assay/holdout/<brief>`` (one record, ``record.json``, listing every
row), so it works the same on the embedded forge and on GitHub: anyone may fetch the bytes,
only the gate can read them. The author needs only the public half, which the forge's
settings record carries beside the signing key (``assay.forge.settings``).

Sealing: an ephemeral X25519 key agrees a secret with the gate's holdout key; HKDF-SHA256
turns it into an AES-256-GCM key; the brief and row ids are the associated data, so a
sealed row moved to another brief or renamed does not open. The gate's holdout key pair is
derived from its signing key's seed (HKDF, its own label): one secret to keep, two keys.

What leaves the gate about a holdout row is only its id, a digest of its sealed bytes (so
a changed row makes older evidence stale) and its verdict: its record names neither the
command nor the output (``sealed_record``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

import assay.refs as refs
from assay.errors import BadInput, Corrupt
from assay.evidence.keys import GateKey, b64, unb64, unprefix
from assay.evidence.records import EvidenceRecord
from assay.evidence.spec import DEFAULT_ROW_TIMEOUT_S, HOLDOUT_ROW, RowSpec
from assay.forge.base import Forge
from assay.forge.records import RecordCodec, RefLog
from assay.ids import check_id
from assay.plumbing import Identity

HOLDOUT_KIND = "holdout"
PUBLIC_PREFIX = "x25519:"
ALGORITHM = "x25519-hkdf-sha256-aes256gcm"
MAX_ROW_BYTES = 1024 * 1024  # one row's command and files, before sealing
MAX_ROWS = 50
MAX_FILES = 100
_DERIVE_LABEL = b"assay holdout x25519 v1"
_SEAL_LABEL = b"assay holdout seal v1"
_NOTHING = "sha256:" + hashlib.sha256(b"").hexdigest()  # a holdout record's output digest


def _unb64(value: Any, *, where: str, size: int | None = None) -> bytes:
    """``unb64`` of a sealed record's field, ``Corrupt`` naming ``where`` when it is not."""
    data = unb64(value, size=size) if isinstance(value, str) else None
    if data is None:
        raise Corrupt(f"{where}: not base64{f' of {size} bytes' if size else ''}")
    return data


def _hkdf(material: bytes, *, salt: bytes | None, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(material)


@dataclass(frozen=True)
class HoldoutPublicKey:
    """The public half authors seal rows to: ``x25519:<base64 of 32 bytes>``."""

    raw: bytes

    @classmethod
    def of(cls, gate: GateKey) -> HoldoutPublicKey:
        public = _private(gate).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls(public)

    @classmethod
    def parse(cls, text: str, *, source: str) -> HoldoutPublicKey:
        raw = unprefix(text, PUBLIC_PREFIX, size=32)
        if raw is None:
            raise BadInput(f"{source}: a holdout public key is {PUBLIC_PREFIX}<base64 of 32 bytes>")
        return cls(raw)

    @property
    def text(self) -> str:
        return PUBLIC_PREFIX + b64(self.raw)


def _private(gate: GateKey) -> X25519PrivateKey:
    return X25519PrivateKey.from_private_bytes(_hkdf(gate.seed, salt=None, info=_DERIVE_LABEL))


def _aad(brief: str, row: str) -> bytes:
    return json.dumps({"brief": brief, "row": row}, sort_keys=True).encode()


def seal(public: HoldoutPublicKey, plaintext: bytes, *, brief: str, row: str) -> dict[str, str]:
    """``plaintext`` sealed so that only the holder of the gate's key opens it."""
    ephemeral = X25519PrivateKey.generate()
    sender = ephemeral.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(public.raw))
    key = _hkdf(shared, salt=sender + public.raw, info=_SEAL_LABEL)
    nonce = os.urandom(12)
    sealed = AESGCM(key).encrypt(nonce, plaintext, _aad(brief, row))
    return {"alg": ALGORITHM, "epk": b64(sender), "nonce": b64(nonce), "ct": b64(sealed)}


def unseal(gate: GateKey, sealed: Mapping[str, Any], *, brief: str, row: str, where: str) -> bytes:
    """The plaintext of a sealed row; ``Corrupt`` naming ``where`` when it does not open."""
    if sealed.get("alg") != ALGORITHM:
        raise Corrupt(f"{where}: sealed with {sealed.get('alg')!r}, not {ALGORITHM}")
    sender = _unb64(sealed.get("epk"), where=f"{where}: field 'epk'", size=32)
    nonce = _unb64(sealed.get("nonce"), where=f"{where}: field 'nonce'", size=12)
    data = _unb64(sealed.get("ct"), where=f"{where}: field 'ct'")
    private = _private(gate)
    mine = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    shared = private.exchange(X25519PublicKey.from_public_bytes(sender))
    key = _hkdf(shared, salt=sender + mine, info=_SEAL_LABEL)
    try:
        return AESGCM(key).decrypt(nonce, data, _aad(brief, row))
    except InvalidTag:
        raise Corrupt(
            f"{where}: does not open with this gate's holdout key (sealed to another key, "
            "moved from another brief or row, or edited)"
        ) from None


@dataclass(frozen=True)
class SealedRow:
    """One holdout row as the forge holds it: its id and its sealed bytes."""

    id: str
    sealed: Mapping[str, str]

    @property
    def digest(self) -> str:
        """A digest of the sealed bytes: names this version of the row, reveals nothing."""
        canonical = json.dumps(dict(self.sealed), sort_keys=True).encode()
        return hashlib.sha256(canonical).hexdigest()[:16]

    def spec(self) -> RowSpec:
        """The row as the merge rule sees it: a changed row makes older evidence stale."""
        return RowSpec(id=HOLDOUT_ROW + self.id, command=f"holdout {self.digest}")


@dataclass(frozen=True)
class OpenedRow:
    """A holdout row the gate opened: the command, its timeout, the files it needs."""

    row: SealedRow
    command: str
    timeout_s: float
    files: Mapping[str, bytes]

    def spec(self) -> RowSpec:
        return RowSpec(id=self.row.spec().id, command=self.command, timeout_s=self.timeout_s)


def _validate(record: dict[str, Any]) -> None:
    rows = record.get("rows")
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        raise BadInput(f"field 'rows' must list at most {MAX_ROWS} rows")
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != {"id", "sealed"}:
            raise BadInput(f"rows[{index}] must hold exactly 'id' and 'sealed'")
        check_id(row["id"], what="holdout row id", where=f"rows[{index}].id")
        if row["id"] in seen:
            raise BadInput(f"rows[{index}].id {row['id']!r} appears twice")
        seen.add(row["id"])
        sealed = row["sealed"]
        if not isinstance(sealed, dict) or set(sealed) != {"alg", "epk", "nonce", "ct"}:
            raise BadInput(f"rows[{index}].sealed must hold alg, epk, nonce and ct")
        if not all(isinstance(value, str) for value in sealed.values()):
            raise BadInput(f"rows[{index}].sealed fields must be strings")


def row_specs_of(record: Any, *, source: str) -> tuple[RowSpec, ...]:
    """The rows a holdout record lists, as the merge rule sees them (a reader that holds no
    key: the board); ``Corrupt`` naming ``source`` when the record is malformed."""
    if not isinstance(record, dict) or record.get("kind") != HOLDOUT_KIND:
        raise Corrupt(f"{source}: not a holdout record")
    try:
        _validate(record)
    except BadInput as exc:
        raise Corrupt(f"{source}: {exc.message}") from None
    return tuple(SealedRow(row["id"], dict(row["sealed"])).spec() for row in record["rows"])


def holdout_codec(brief: str) -> RecordCodec:
    """The holdout record's codec: ``record.json`` on ``refs/assay/holdout/<brief>``."""
    return RecordCodec(refs.holdout_ref(brief), HOLDOUT_KIND, validate=_validate)


def _log(forge: Forge, brief: str) -> RefLog:
    return RefLog.of(forge, holdout_codec(brief))


def read_rows(
    forge: Forge, brief: str, *, known: Mapping[str, str] | None = None
) -> list[SealedRow]:
    """The brief's holdout rows, sealed (``known``: refs a fetch just made found)."""
    log = _log(forge, brief)
    if known is not None:
        log.assume(known.get(refs.holdout_ref(brief)))
    record = log.latest(fetch=known is None)
    if record is None:
        return []
    return [SealedRow(row["id"], dict(row["sealed"])) for row in record["rows"]]


def _check_path(path: str, *, source: str) -> str:
    pure = PurePosixPath(path)
    if (
        not path
        or pure.is_absolute()
        or ".." in pure.parts
        or (pure.parts and pure.parts[0] in (".git", ".assay"))
        or str(pure) != path
    ):
        raise BadInput(f"{source}: {path!r} must be a relative path inside the tree")
    return path


def add_row(
    forge: Forge,
    brief: str,
    row: str,
    *,
    command: str,
    files: Mapping[str, bytes],
    public: HoldoutPublicKey,
    author: Identity,
    timeout_s: float = DEFAULT_ROW_TIMEOUT_S,
) -> list[SealedRow]:
    """Seal ``row`` (its command and files) to ``public`` and store it, replacing a row of
    the same id; returns the brief's rows after the write."""
    check_id(brief, where="BRIEF")
    check_id(row, what="holdout row id", where="--id")
    if not command.strip():
        raise BadInput("--run: a holdout row needs a command")
    if len(files) > MAX_FILES:
        raise BadInput(f"--file: at most {MAX_FILES} files per holdout row")
    plain = json.dumps(
        {
            "run": command,
            "timeout_s": timeout_s,
            "files": {_check_path(p, source="--file"): b64(d) for p, d in files.items()},
        },
        sort_keys=True,
    ).encode()
    if len(plain) > MAX_ROW_BYTES:
        raise BadInput(f"--file: a holdout row is at most {MAX_ROW_BYTES} bytes with its files")
    sealed = SealedRow(row, seal(public, plain, brief=brief, row=row))
    rows = [r for r in read_rows(forge, brief) if r.id != row] + [sealed]
    if len(rows) > MAX_ROWS:
        raise BadInput(f"{brief}: at most {MAX_ROWS} holdout rows")
    _log(forge, brief).append(
        {"rows": [{"id": r.id, "sealed": dict(r.sealed)} for r in rows]},
        author=author,
        message=f"holdout {brief}: row {row}",
    )
    return rows


def open_rows(gate: GateKey, rows: Sequence[SealedRow], *, brief: str) -> list[OpenedRow]:
    """Every row opened with the gate's key; ``Corrupt`` naming the row otherwise."""
    opened: list[OpenedRow] = []
    for row in rows:
        where = f"{refs.holdout_ref(brief)} row {row.id!r}"
        plain = unseal(gate, row.sealed, brief=brief, row=row.id, where=where)
        try:
            data = json.loads(plain)
            command, timeout = data["run"], float(data["timeout_s"])
            files = {
                _check_path(path, source=where): _unb64(value, where=f"{where}: {path}")
                for path, value in dict(data["files"]).items()
            }
        except (ValueError, KeyError, TypeError, BadInput) as exc:
            raise Corrupt(f"{where}: opened, but is not a holdout row ({exc})") from None
        if not isinstance(command, str) or not 0 < timeout <= 24 * 3600:
            raise Corrupt(f"{where}: opened, but its command or timeout is malformed")
        opened.append(OpenedRow(row, command, timeout, files))
    return opened


def place_files(tree: Path, rows: Sequence[OpenedRow]) -> None:
    """Write every row's files into the gate's clean tree, at their paths (after the public
    rows ran: they never saw them)."""
    for row in rows:
        for path, data in row.files.items():
            target = tree / path
            for parent in reversed(target.relative_to(tree).parents):
                folder = tree / parent
                if folder.is_symlink():  # the desk's tree must not aim a holdout file away
                    raise Corrupt(f"holdout row {row.row.id!r}: {parent} is a symlink")
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            target.write_bytes(data)


def sealed_record(record: EvidenceRecord, row: OpenedRow) -> EvidenceRecord:
    """``record`` with nothing of the row's content: the command and output are replaced
    by the row's digest, the runner's findings (they name its tests) by a count, and the
    runner it starts is not said."""
    findings = (f"holdout: {len(record.findings)} finding(s) from the runner",) * bool(
        record.findings
    )
    return dataclasses.replace(
        record,
        command=row.row.spec().command,
        output_tail="",
        output_sha256=_NOTHING,
        output_bytes=0,
        findings=findings,
        runner="",
        notes=(),
        pinned=(),
    )
