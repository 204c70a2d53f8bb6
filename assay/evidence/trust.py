"""Which gate public key a reader of a forge trusts, and what the gate refuses to sign over.

The forge vouches for one key: ``$ASSAY_GATE_PUBLIC_KEY`` (on GitHub a repository variable,
which only an admin sets), else the forge's settings record where only an admin can write
it (``assay.forge.settings``; never on a forge whose custom refs any writer may move). A
record counts only when that key's signature checks. The gate itself signs with its private
key, and refuses to when the forge vouches for another key or when the brief's evidence so
far was signed by another key: it names both fingerprints instead of starting a second,
silently incompatible chain of signatures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from assay.errors import AssayError, Denied
from assay.evidence.keys import GateKey, PublicKey, gate_key, public_key_from_env, signing_key
from assay.evidence.records import EvidenceRecord
from assay.forge.base import Forge
from assay.forge.settings import read_settings, record_gate_key


def vouched_key(forge: Forge, *, known: Mapping[str, str] | None = None) -> PublicKey | None:
    """The key the forge vouches for, or None when it vouches for none (``known``: refs a
    fetch just made found, so the settings record costs no round trip)."""
    from_env = public_key_from_env()
    if from_env is not None or not forge.protects_custom_refs:
        return from_env
    return read_settings(forge, known=known).gate_public_key


def reader_key(forge: Forge, *, known: Mapping[str, str] | None = None) -> PublicKey | None:
    """What the board, status and a desk's review table check signatures with: the vouched
    key, else the public half of a gate key this process can read, else None (signatures
    are then seen, not checked; the merge always checks them)."""
    vouched = vouched_key(forge, known=known)
    if vouched is not None:
        return vouched
    try:
        own = gate_key()
    except AssayError:  # an unreadable key file: signatures are seen, not checked
        return None
    return own.public if own is not None else None


@dataclass(frozen=True)
class GateTrust:
    """The key a gate signs and checks with, and whether the forge vouches for it."""

    key: PublicKey
    vouched: bool


def gate_trust(forge: Forge, gate: GateKey) -> GateTrust:
    """The gate's own public key, once the forge is known to vouch for it (or for none)."""
    vouched = vouched_key(forge)
    if vouched is not None and vouched != gate.public:
        raise Denied(
            f"the forge trusts gate key {vouched.fingerprint}, but this gate's key "
            f"({gate.where}) is {gate.public.fingerprint}: run the gate with the forge's key "
            "(ASSAY_GATE_STATE or ASSAY_EVIDENCE_KEY), or record this one with "
            "`assay forge gate-key PATH --replace`"
        )
    return GateTrust(gate.public, vouched=vouched is not None)


def merge_key(forge: Forge, key: GateKey | None, *, insecure: bool) -> PublicKey | None:
    """What a merge checks signatures with: the vouched key needs no private key at all;
    otherwise the gate's own (made when missing, as before the forge recorded one)."""
    if insecure:
        return None
    vouched = vouched_key(forge)
    if vouched is not None and key is None:
        return vouched
    gate = signing_key(key=key)
    assert gate is not None  # signing_key returns None only when insecure
    return gate_trust(forge, gate).key


def refuse_other_signers(
    records: Iterable[EvidenceRecord], trust: GateTrust, *, brief: str
) -> None:
    """``Denied`` when a record of ``brief`` is signed by a key other than the gate's, on a
    forge that vouches for no key: this gate may be one made by mistake (another state
    directory), and its records would never count beside the others. Where the forge
    vouches for this gate's key (after ``assay forge gate-key --replace``), older records
    signed by another key simply do not count."""
    if trust.vouched:
        return
    for record in records:
        if record.signer and record.signer != trust.key.fingerprint:
            raise Denied(
                f"{brief}: evidence record for row {record.row!r} is signed by gate key "
                f"{record.signer}, and this gate's key is {trust.key.fingerprint}: refusing "
                "to sign over another key's evidence (run the gate with the key that signed "
                "it, or record this gate's key on the forge: `assay forge gate-key PATH`)"
            )


def record_gate(forge: Forge, gate: GateKey, *, replace: bool = False) -> bool:
    """Record ``gate``'s public keys on ``forge`` (its admin's act): the signing key and
    the holdout key derived with it."""
    from assay.evidence.holdout import HoldoutPublicKey

    holdout = HoldoutPublicKey.of(gate).text
    return record_gate_key(forge, gate.public, holdout=holdout, replace=replace)
