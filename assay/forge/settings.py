"""The forge's own settings: one record on ``refs/assay/config``, written by its admin.

Today it holds the gate's public key (``gate_public_key``: ``ed25519:…``), so that anyone
who reads the forge can check a signed evidence record and only the gate can make one. On
the embedded forge only an admin writes this ref (``assay.forge.principals``: no other role
has it among its writes; the local filesystem is the admin's path), so it is a trust anchor
there. A forge whose custom refs any writer may move (GitHub: rulesets do not cover
``refs/assay/``) says so with ``Forge.protects_custom_refs = False``, and its record is never
read as trusted (``assay.evidence.trust`` decides which key a reader trusts).

It also holds the forge's push budget (``pushes_per_minute``: 0 or absent is unlimited),
which ``assay forge serve`` enforces (:mod:`assay.forge.budget`), and its merge budget
(``merges_per_minute``: 0 or absent is unlimited on the embedded forge, GitHub's one a minute
on a ``github:`` forge), which the gate keeps to (``Forge.merge_gate``). Every record is the
whole settings: a writer of one field carries the others over (:func:`write_settings`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import assay.refs as refs
from assay.errors import BadInput, Denied
from assay.forge.base import Forge
from assay.forge.records import RecordCodec, RefLog
from assay.plumbing import Identity

if TYPE_CHECKING:
    from assay.evidence.keys import PublicKey

SETTINGS_KIND = "forge-config"
# Who writes the settings record: the forge's admin, through the local filesystem.
ADMIN = Identity(name="assay-admin", email="admin@assay.invalid")
_KNOWN = {
    "v",
    "kind",
    "gate_public_key",
    "holdout_public_key",
    "pushes_per_minute",
    "merges_per_minute",
}
MAX_PUSHES_PER_MINUTE = 100_000


def _validate(record: dict[str, Any]) -> None:
    unknown = set(record) - _KNOWN
    if unknown:
        raise BadInput(f"unknown fields {sorted(unknown)}")
    key = record.get("gate_public_key", "")
    if not isinstance(key, str):
        raise BadInput("field 'gate_public_key' must be a string")
    if key:
        _public_key(key, "field 'gate_public_key'")
    if not isinstance(record.get("holdout_public_key", ""), str):
        raise BadInput("field 'holdout_public_key' must be a string")
    check_pushes_per_minute(record.get("pushes_per_minute", 0), "field 'pushes_per_minute'")
    check_pushes_per_minute(record.get("merges_per_minute", 0), "field 'merges_per_minute'")


def _public_key(text: str, source: str) -> PublicKey:
    # Imported here: assay.evidence reads this module, so importing it first must work.
    from assay.evidence.keys import PublicKey

    return PublicKey.parse(text, source=source)


def check_pushes_per_minute(value: Any, where: str) -> int:
    """``value`` as a push or merge budget (0: unlimited), or ``BadInput`` naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{where} must be a whole number, not {value!r}")
    if not 0 <= value <= MAX_PUSHES_PER_MINUTE:
        raise BadInput(
            f"{where} must be between 0 (unlimited) and {MAX_PUSHES_PER_MINUTE}, not {value}"
        )
    return value


@dataclass(frozen=True)
class ForgeSettings:
    """What ``refs/assay/config`` says (an empty record before anyone wrote one)."""

    gate_public_key: PublicKey | None = None
    # What holdout rows are sealed to (``x25519:…``, read by ``assay.evidence.holdout``).
    holdout_public_key: str = ""
    # Pushes that move refs the embedded forge's server takes a minute (0: unlimited).
    pushes_per_minute: int = 0
    # Merges the gate makes a minute (0: unlimited here; a github: forge's default is one).
    merges_per_minute: int = 0

    def to_json(self) -> dict[str, Any]:
        key = self.gate_public_key
        return {
            "gate_public_key": key.text if key else "",
            "holdout_public_key": self.holdout_public_key,
            "pushes_per_minute": self.pushes_per_minute,
            "merges_per_minute": self.merges_per_minute,
        }


def _log(forge: Forge) -> RefLog:
    return RefLog.of(forge, settings_codec())


def settings_codec() -> RecordCodec:
    """The settings record's codec: ``record.json`` on ``refs/assay/config``."""
    return RecordCodec(refs.CONFIG, SETTINGS_KIND, validate=_validate)


def _from_record(record: dict[str, Any] | None) -> ForgeSettings:
    if record is None:
        return ForgeSettings()
    key = record.get("gate_public_key")
    return ForgeSettings(
        _public_key(key, refs.CONFIG) if key else None,
        holdout_public_key=record.get("holdout_public_key", "") if key else "",
        pushes_per_minute=record.get("pushes_per_minute", 0),
        merges_per_minute=record.get("merges_per_minute", 0),
    )


def read_settings(forge: Forge, *, known: Mapping[str, str] | None = None) -> ForgeSettings:
    """The forge's settings record (``Corrupt`` naming the ref when it is malformed);
    ``known``: refs a fetch just made found (no round trip then)."""
    log = _log(forge)
    if known is not None:
        log.assume(known.get(refs.CONFIG))
    return _from_record(log.latest(fetch=known is None))


def local_settings_tip(git_dir: Path) -> str | None:
    """The commit ``refs/assay/config`` points at in the forge at ``git_dir`` (no fetch)."""
    from assay.odb import read_ref

    return read_ref(git_dir, refs.CONFIG)


def read_local_settings(git_dir: Path, tip: str | None) -> ForgeSettings:
    """The settings record at commit ``tip`` of the forge at ``git_dir`` itself, as its
    server reads it (no cache, no fetch), checked as :func:`read_settings` checks it."""
    from assay.odb import read_blobs

    if tip is None:
        return ForgeSettings()
    codec = settings_codec()  # the record's one parser, as a reader through a forge uses it
    (blob,) = read_blobs(git_dir, [(tip, codec.path)])
    return _from_record(codec.parse(tip, blob))


def write_settings(
    forge: Forge, settings: ForgeSettings, *, author: Identity = ADMIN, message: str
) -> None:
    """Append ``settings`` as the forge's whole settings record."""
    record: dict[str, Any] = {
        "gate_public_key": settings.gate_public_key.text if settings.gate_public_key else "",
        "holdout_public_key": settings.holdout_public_key,
        "pushes_per_minute": settings.pushes_per_minute,
    }
    if settings.merges_per_minute:  # absent when unset: older readers take the record
        record["merges_per_minute"] = settings.merges_per_minute
    _log(forge).append(
        record,
        author=author,
        message=message,
    )


def record_push_budget(forge: Forge, per_minute: int, *, author: Identity = ADMIN) -> bool:
    """Record ``per_minute`` (0: unlimited) as the forge's push budget, the other settings
    kept; False when it already was."""
    return _record_budget(forge, "pushes_per_minute", "push", per_minute, author=author)


def record_merge_budget(forge: Forge, per_minute: int, *, author: Identity = ADMIN) -> bool:
    """Record ``per_minute`` (0: unlimited) as the merges the gate makes a minute, the other
    settings kept; False when it already was."""
    return _record_budget(forge, "merges_per_minute", "merge", per_minute, author=author)


def _record_budget(
    forge: Forge, name: str, noun: str, per_minute: int, *, author: Identity
) -> bool:
    """One budget field of the settings record set to ``per_minute`` (its flag,
    ``--<field with dashes>``, named when it is out of range)."""
    check_pushes_per_minute(per_minute, "--" + name.replace("_", "-"))
    settings = read_settings(forge)
    if getattr(settings, name) == per_minute:
        return False
    said = f"{per_minute} a minute" if per_minute else "unlimited"
    changes: dict[str, Any] = {name: per_minute}
    write_settings(
        forge,
        dataclasses.replace(settings, **changes),
        author=author,
        message=f"config: {noun} budget {said}",
    )
    return True


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
    write_settings(
        forge,
        dataclasses.replace(settings, gate_public_key=key, holdout_public_key=holdout),
        author=author,
        message=f"config: gate key {key.fingerprint}",
    )
    return True
