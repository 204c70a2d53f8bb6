"""Evidence records: the format, its version, and the checks that make it tamper-evident.

One record per row run by the gate, stored as ``record.json`` in one commit on
``refs/assay/evidence/<brief>``::

    {"v": 1, "kind": "evidence", "brief": "calc", "row": "unit", "command": "pytest -q", "exit": 0,
     "timed_out": false, "seconds": 1.42, "output_sha256": "sha256:…", "output_bytes": 812,
     "output_tail": "…", "head_sha": "<commit>", "env_fingerprint": {"python": "3.11.2"},
     "verifier": "gate:ci@host", "journal_head": "sha256:…" | "", "at": "2026-…Z",
     "prev": "sha256:<digest of the previous record>" | "", "digest": "sha256:…",
     "sig": "ed25519:<key fingerprint>:<signature>",         # absent only when insecure
     "pinned": ["tests/test_calc.py"],                       # absent when nothing was pinned
     "sandboxed": false}                                     # present only for a host run

Integrity, checked on every read (any failure is ``Corrupt``, exit 6):

- ``digest`` is the sha256 of the record's canonical JSON without ``digest`` and ``sig``:
  editing a field without recomputing it is detected;
- ``prev`` chains each record to the one before it: editing, dropping or reordering an
  earlier record is detected, even with digests recomputed;
- the ref's history must be linear, one record per commit (checked by the store), and
  must extend the tip this gate saw last (so rewriting the whole chain is detected too);
- ``sig`` is an Ed25519 signature of the record by the gate's private key
  (``assay.evidence.keys``: held by the gate, not by desks), checked with the public key the
  forge vouches for (``assay.forge.settings``): a record forged or re-signed without the
  private key is detected, a record signed by another key is named by that key's
  fingerprint and does not count, and an unsigned record never counts unless the gate runs
  ``--insecure-unsigned-evidence``. Records of older versions carried ``mac`` (an HMAC):
  such a record reads as unsigned, so a brief verified before the key pair is verified again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from assay.errors import AssayError, Corrupt
from assay.evidence.keys import GateKey, PublicKey, split_signature

RECORD_VERSION = 1
RECORD_FILE = "record.json"
RECORD_KIND = "evidence"  # the RefLog kind, so generic ref-log readers accept the records
MAX_PINNED = 100_000
MAX_RECORD_BYTES = 8 * 1024 * 1024  # a record keeps a 4 KiB tail; one near this is not a record

_FIELDS: dict[str, type | tuple[type, ...]] = {
    "v": int,
    "kind": str,
    "brief": str,
    "row": str,
    "command": str,
    "exit": int,
    "timed_out": bool,
    "seconds": (int, float),
    "output_sha256": str,
    "output_bytes": int,
    "output_tail": str,
    "head_sha": str,
    "env_fingerprint": dict,
    "verifier": str,
    "journal_head": str,
    "at": str,
    "prev": str,
    "digest": str,
}


@dataclass(frozen=True)
class EvidenceRecord:
    """One verified row: what the gate ran, on which commit, in which environment."""

    brief: str
    row: str
    command: str
    exit: int
    timed_out: bool
    seconds: float
    output_sha256: str
    output_bytes: int
    output_tail: str
    head_sha: str
    env_fingerprint: Mapping[str, str]
    verifier: str
    journal_head: str
    at: str
    prev: str = ""
    digest: str = ""
    sig: str = ""
    pinned: tuple[str, ...] = ()  # paths restored from main before the row ran (sorted)
    runner: str = ""  # whose structured result was read ("pytest", "unittest"); "" unstructured
    findings: tuple[str, ...] = ()  # why the runner's own result fails the row
    notes: tuple[str, ...] = ()  # what the review must say: files the desk changed, protect: []
    # False: the row ran on the host (``--insecure-unsandboxed-rows``), which the record
    # says under its signature so that the merge can refuse it without the explicit flag.
    sandboxed: bool = True
    v: int = RECORD_VERSION
    kind: str = RECORD_KIND
    signed: bool = field(default=False, compare=False)  # ``sig`` checked by a trusted key
    signer: str = field(default="", compare=False)  # the fingerprint ``sig`` names

    @property
    def passed(self) -> bool:
        return self.exit == 0 and not self.timed_out and not self.findings

    def body(self) -> dict[str, Any]:
        """The fields covered by ``digest`` (everything but ``digest``, ``sig``)."""
        data = asdict(self)
        data["env_fingerprint"] = dict(self.env_fingerprint)
        for name in ("digest", "sig", "signed", "signer"):
            data.pop(name)
        # Each optional field is absent when empty, so older records keep their digest.
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value:
                data[name] = list(value) if isinstance(value, tuple) else value
            else:
                data.pop(name)
        if self.sandboxed:  # likewise: only an unsandboxed row's record carries the field
            data.pop("sandboxed")
        return data

    def to_json(self) -> dict[str, Any]:
        data = self.body()
        data["digest"] = self.digest
        if self.sig:
            data["sig"] = self.sig
        return data


_OPTIONAL = ("pinned", "runner", "findings", "notes")
MAX_LINES = 1000  # findings or notes in one record


def canonical(data: Mapping[str, Any]) -> bytes:
    """The one byte form a record is hashed in."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _digest(body: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()


def _signed_bytes(body: Mapping[str, Any], digest: str) -> bytes:
    return canonical({**body, "digest": digest})


def seal(record: EvidenceRecord, *, prev: str, key: GateKey | None) -> EvidenceRecord:
    """``record`` chained after ``prev``, with its digest (and signature, given a key)."""
    body = {**record.body(), "prev": prev, "env_fingerprint": dict(record.env_fingerprint)}
    digest = _digest(body)
    sig = key.sign(_signed_bytes(body, digest)) if key else ""
    return EvidenceRecord(
        **{
            **body,
            "pinned": tuple(body.get("pinned", ())),
            "findings": tuple(body.get("findings", ())),
            "notes": tuple(body.get("notes", ())),
        },
        digest=digest,
        sig=sig,
        signed=bool(key),
        signer=key.public.fingerprint if key else "",
    )


def encode(record: EvidenceRecord) -> bytes:
    """The bytes of ``record.json``."""
    return (
        json.dumps(record.to_json(), sort_keys=True, indent=1, ensure_ascii=False).encode() + b"\n"
    )


def load_json(
    data: bytes,
    *,
    where: str,
    what: str,
    limit: int,
    error: type[AssayError] = Corrupt,
) -> Any:
    """``data`` as JSON, or ``error`` naming ``where`` and ``what`` when it is over ``limit``
    bytes, not UTF-8 JSON, or nested too deeply to parse (the gate's records, the reviews)."""
    if len(data) > limit:
        raise error(f"{where}: {what} is over {limit} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{where}: {what} is not JSON: {exc}") from exc
    except RecursionError:
        raise error(f"{where}: {what} is nested too deeply") from None


def decode(data: bytes, *, source: str, key: PublicKey | None = None) -> EvidenceRecord:
    """Parse and check one record; ``Corrupt`` naming ``source`` and the field on any flaw.

    ``key`` is the public key the reader trusts: a record it signed is ``signed``; a record
    another key signed is not, and says which (``signer``); a bad signature by ``key`` is
    ``Corrupt``. Without ``key`` a signature is seen, not checked."""
    raw = load_json(data, where=source, what="evidence record", limit=MAX_RECORD_BYTES)
    if not isinstance(raw, dict):
        raise Corrupt(f"{source}: evidence record is not a JSON object")
    version = raw.get("v")
    if version != RECORD_VERSION:
        newer = isinstance(version, int) and version > RECORD_VERSION
        hint = " (written by a newer Assay: upgrade the gate)" if newer else ""
        raise Corrupt(
            f"{source}: evidence record version {version!r} is not {RECORD_VERSION}{hint}"
        )
    if raw.get("kind") != RECORD_KIND:
        raise Corrupt(f"{source}: field 'kind' is {raw.get('kind')!r}, not {RECORD_KIND!r}")
    for name, kind in _FIELDS.items():
        value = raw.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise Corrupt(f"{source}: evidence record field {name!r} is missing or mistyped")
    unknown = set(raw) - set(_FIELDS) - {"sig", "mac", "sandboxed", *_OPTIONAL}
    if unknown:
        raise Corrupt(f"{source}: evidence record has unknown fields {sorted(unknown)}")
    fp = raw["env_fingerprint"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in fp.items()):
        raise Corrupt(f"{source}: evidence record field 'env_fingerprint' must map str to str")
    lists = {
        "pinned": _strings(raw, "pinned", most=MAX_PINNED, unit="paths", source=source),
        "findings": _strings(raw, "findings", most=MAX_LINES, unit="lines", source=source),
        "notes": _strings(raw, "notes", most=MAX_LINES, unit="lines", source=source),
    }
    if raw.get("sandboxed", False) is not False:
        raise Corrupt(
            f"{source}: evidence record field 'sandboxed' must be false when present "
            "(a sandboxed row's record does not carry it)"
        )
    if not isinstance(raw.get("runner", ""), str):
        raise Corrupt(f"{source}: evidence record field 'runner' is mistyped")
    if not isinstance(raw.pop("mac", ""), str):  # an older version's HMAC: unsigned now
        raise Corrupt(f"{source}: evidence record field 'mac' is mistyped")
    sig = raw.pop("sig", "")
    if not isinstance(sig, str):
        raise Corrupt(f"{source}: evidence record field 'sig' is mistyped")
    digest = raw.pop("digest")
    if _digest(raw) != digest:
        raise Corrupt(
            f"{source}: evidence record for row {raw['row']!r} was edited (digest mismatch)"
        )
    signer, signature = split_signature(sig, source=source) if sig else ("", b"")
    signed = False
    if key is not None and signer == key.fingerprint:
        if not key.verifies(signature, _signed_bytes(raw, digest)):
            raise Corrupt(
                f"{source}: evidence record for row {raw['row']!r} fails its gate signature"
            )
        signed = True
    raw.update(lists)
    return EvidenceRecord(**raw, digest=digest, sig=sig, signed=signed, signer=signer)


def _strings(
    raw: Mapping[str, Any], name: str, *, most: int, unit: str, source: str
) -> tuple[str, ...]:
    """The optional list field ``name`` (absent: empty): at most ``most`` strings of at most
    4,096 characters each, else ``Corrupt`` naming the field."""
    value = raw.get(name, [])
    if (
        not isinstance(value, list)
        or len(value) > most
        or not all(isinstance(item, str) and len(item) <= 4096 for item in value)
    ):
        raise Corrupt(f"{source}: evidence record field {name!r} must list at most {most} {unit}")
    return tuple(value)


def check_chain(records: Sequence[EvidenceRecord], *, source: str) -> None:
    """Each record's ``prev`` must be the digest of the one before it (the first: "")."""
    expected = ""
    for index, record in enumerate(records):
        if record.prev != expected:
            raise Corrupt(
                f"{source}: evidence record {index} (row {record.row!r}) does not chain to the "
                "record before it: the evidence history was edited"
            )
        expected = record.digest
