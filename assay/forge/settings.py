"""The forge's own settings: one record on ``refs/assay/config``, written by its admin.

Today it holds the gate's public key (``gate_public_key``: ``ed25519:…``), so that anyone
who reads the forge can check a signed evidence record and only the gate can make one. On
the embedded forge only an admin writes this ref (``assay.forge.principals``: no other role
has it among its writes; the local filesystem is the admin's path), so it is a trust anchor
there. A forge whose custom refs any writer may move (GitHub: rulesets do not cover
``refs/assay/``) says so with ``Forge.protects_custom_refs = False``, and its record is never
read as trusted (``assay.evidence.trust`` decides which key a reader trusts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import assay.refs as refs
from assay.errors import BadInput, Denied
from assay.evidence.keys import PublicKey
from assay.forge.base import Forge
from assay.forge.records import RefLog
from assay.plumbing import Identity

SETTINGS_KIND = "forge-config"
# Who writes the settings record: the forge's admin, through the local filesystem.
ADMIN = Identity(name="assay-admin", email="admin@assay.invalid")
_KNOWN = {"v", "kind", "gate_public_key", "holdout_public_key"}


def _validate(record: dict[str, Any]) -> None:
    unknown = set(record) - _KNOWN
    if unknown:
        raise BadInput(f"unknown fields {sorted(unknown)}")
    key = record.get("gate_public_key", "")
    if not isinstance(key, str):
        raise BadInput("field 'gate_public_key' must be a string")
    if key:
        PublicKey.parse(key, source="field 'gate_public_key'")
    if not isinstance(record.get("holdout_public_key", ""), str):
        raise BadInput("field 'holdout_public_key' must be a string")


@dataclass(frozen=True)
class ForgeSettings:
    """What ``refs/assay/config`` says (an empty record before anyone wrote one)."""

    gate_public_key: PublicKey | None = None
    # What holdout rows are sealed to (``x25519:…``, read by ``assay.evidence.holdout``).
    holdout_public_key: str = ""

    def to_json(self) -> dict[str, Any]:
        key = self.gate_public_key
        return {
            "gate_public_key": key.text if key else "",
            "holdout_public_key": self.holdout_public_key,
        }


def _log(forge: Forge) -> RefLog:
    return RefLog(forge, refs.CONFIG, kind=SETTINGS_KIND, validate=_validate)


def read_settings(forge: Forge, *, known: Mapping[str, str] | None = None) -> ForgeSettings:
    """The forge's settings record (``Corrupt`` naming the ref when it is malformed);
    ``known``: refs a fetch just made found (no round trip then)."""
    log = _log(forge)
    if known is not None:
        log.assume(known.get(refs.CONFIG))
    record = log.latest(fetch=known is None)
    if record is None or not record.get("gate_public_key"):
        return ForgeSettings()
    return ForgeSettings(
        PublicKey.parse(record["gate_public_key"], source=refs.CONFIG),
        holdout_public_key=record.get("holdout_public_key", ""),
    )


def record_gate_key(
    forge: Forge,
    key: PublicKey,
    *,
    holdout: str = "",
    author: Identity = ADMIN,
    replace: bool = False,
) -> bool:
    """Record ``key`` (and the ``holdout`` public key derived with it) as the forge's gate
    key; False when it already was. Another key already recorded is ``Denied`` naming both
    fingerprints, unless ``replace``."""
    settings = read_settings(forge)
    current = settings.gate_public_key
    if current == key and settings.holdout_public_key == holdout:
        return False
    if current is not None and current != key and not replace:
        raise Denied(
            f"{refs.CONFIG}: the forge already trusts gate key {current.fingerprint}, not "
            f"{key.fingerprint}: pass --replace to trust the new one (evidence signed by the "
            "old key then no longer counts)"
        )
    _log(forge).append(
        {"gate_public_key": key.text, "holdout_public_key": holdout},
        author=author,
        message=f"config: gate key {key.fingerprint}",
    )
    return True
