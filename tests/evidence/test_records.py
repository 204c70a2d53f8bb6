"""Evidence records: round trip, version and type checks, edits, chains and signatures."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from assay.errors import Corrupt
from assay.evidence.records import EvidenceRecord, check_chain, decode, encode, seal
from tests.evidence.gatekit import record
from tests.gatekeys import key_for


def _record(row: str = "unit", exit: int = 0) -> EvidenceRecord:
    return record(
        row=row,
        exit=exit,
        seconds=1.5,
        output_sha256="sha256:" + "0" * 64,
        output_bytes=12,
        output_tail="1 passed",
        env_fingerprint={"python": "3.11.2"},
        at="2026-01-01T00:00:00Z",
    )


def test_a_sealed_record_round_trips() -> None:
    sealed = seal(_record(), prev="", key=None)
    back = decode(encode(sealed), source="evidence/calc")
    assert back == sealed
    assert back.digest.startswith("sha256:")


def test_an_edited_field_is_corrupt() -> None:
    data = json.loads(encode(seal(_record(exit=1), prev="", key=None)))
    data["exit"] = 0
    with pytest.raises(Corrupt, match="edited"):
        decode(json.dumps(data).encode(), source="evidence/calc")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("v", 2, "version"), ("exit", "0", "'exit'"), ("extra", 1, "unknown fields")],
)
def test_malformed_records_are_corrupt(field: str, value: object, match: str) -> None:
    data = json.loads(encode(seal(_record(), prev="", key=None)))
    data[field] = value
    with pytest.raises(Corrupt, match=match):
        decode(json.dumps(data).encode(), source="evidence/calc")
    with pytest.raises(Corrupt, match="not JSON"):
        decode(b"{nope", source="evidence/calc")


def test_a_chain_with_a_recomputed_middle_record_is_corrupt() -> None:
    first = seal(_record("a"), prev="", key=None)
    second = seal(_record("b"), prev=first.digest, key=None)
    check_chain([first, second], source="evidence/calc")
    forged_first = seal(replace(_record("a"), exit=0, seconds=9.0), prev="", key=None)
    with pytest.raises(Corrupt, match="does not chain"):
        check_chain([forged_first, second], source="evidence/calc")
    with pytest.raises(Corrupt, match="does not chain"):
        check_chain([second], source="evidence/calc")


def test_a_gate_key_signs_records_and_detects_forgeries() -> None:
    gate, other = key_for("gate"), key_for("another")
    sealed = seal(_record(), prev="", key=gate)
    assert decode(encode(sealed), source="e", key=gate.public).signed
    assert not decode(encode(sealed), source="e", key=None).signed
    # Another key's reader sees who signed, and does not count it.
    seen = decode(encode(sealed), source="e", key=other.public)
    assert not seen.signed and seen.signer == gate.public.fingerprint
    # A signature that names the gate's key but was not made by it is a forgery.
    data = json.loads(encode(sealed))
    forged = other.sign(b"anything").split(":")[2]
    data["sig"] = f"ed25519:{gate.public.fingerprint}:{forged}"
    with pytest.raises(Corrupt, match="signature"):
        decode(json.dumps(data).encode(), source="e", key=gate.public)
    # A record edited under a valid signature fails its digest first.
    edited = {**json.loads(encode(sealed)), "exit": 0 if sealed.exit else 1}
    with pytest.raises(Corrupt, match="edited"):
        decode(json.dumps(edited).encode(), source="e", key=gate.public)
    unsigned = seal(_record(), prev="", key=None)
    assert not decode(encode(unsigned), source="e", key=gate.public).signed


@pytest.mark.parametrize(
    "sig",
    ["ed25519", "ed25519:abc:def", "hmac-sha256:" + "ab" * 32, "ed25519:" + "0" * 16 + ":!!"],
)
def test_a_malformed_signature_field_is_corrupt(sig: str) -> None:
    data = {**json.loads(encode(seal(_record(), prev="", key=key_for("gate")))), "sig": sig}
    with pytest.raises(Corrupt, match="'sig'"):
        decode(json.dumps(data).encode(), source="e", key=key_for("gate").public)


def test_an_older_records_hmac_reads_as_unsigned() -> None:
    data = json.loads(encode(seal(_record(), prev="", key=None)))
    data["mac"] = "hmac-sha256:" + "ab" * 32
    record = decode(json.dumps(data).encode(), source="e", key=key_for("gate").public)
    assert not record.signed and not record.sig
