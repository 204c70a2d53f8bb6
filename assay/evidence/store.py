"""The evidence ref of a brief on the forge: ``refs/assay/evidence/<brief>``.

Each record is one commit whose tree holds ``record.json``; each commit has exactly one
parent, the previous record's commit. Appends are compare-and-swap pushes against the tip
just read, so two gates never overwrite each other (the loser re-reads and re-chains).

Reading validates everything (``Corrupt``, exit 6, on any flaw): every record's format,
digest, chain link and (with a gate key) signature; the history's shape (linear, one
record per commit); and that the tip still descends from the tip this machine saw last,
which is remembered in the forge cache, so a history rewritten wholesale is detected too.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import assay.refs as refs
from assay.errors import BadInput, Corrupt
from assay.evidence.keys import GateKey, PublicKey
from assay.evidence.records import (
    RECORD_FILE,
    EvidenceRecord,
    check_chain,
    decode,
    encode,
    seal,
)
from assay.forge import Forge
from assay.forge.records import ObjectReader, Stage, WritePolicy, chain, write
from assay.ids import check_id
from assay.plumbing import Identity

EVIDENCE_PREFIX = refs.EVIDENCE
VERIFIER_ENV = "ASSAY_VERIFIER"
_APPEND_ATTEMPTS = 8


def evidence_ref(brief: str) -> str:
    """The ref holding ``brief``'s evidence records."""
    return EVIDENCE_PREFIX + check_id(brief)


def default_verifier() -> str:
    """``gate:<name>``: ``$ASSAY_VERIFIER`` or ``user@host`` of this machine."""
    name = os.environ.get(VERIFIER_ENV, "").strip()
    if not name:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "gate"
        name = f"{user}@{socket.gethostname()}"
    return name if name.startswith("gate:") else f"gate:{name}"


@dataclass(frozen=True)
class EvidenceCodec:
    """The evidence log's codec (``assay.forge.records.Codec``): one sealed record as
    ``record.json`` per commit on ``refs/assay/evidence/<brief>``; decoded with ``key``'s
    signature checked when one is given (the chain is the walker's: ``decode_records``)."""

    brief: str
    key: PublicKey | None = None
    path: str = RECORD_FILE

    @property
    def ref(self) -> str:
        return evidence_ref(self.brief)

    def encode(self, record: EvidenceRecord) -> tuple[EvidenceRecord, bytes]:
        if record.brief != self.brief:
            raise BadInput(f"{self.ref}: a record of brief {record.brief!r} does not go here")
        return record, encode(record)

    def parse(self, commit: str, blob: bytes | None) -> EvidenceRecord:
        where = f"{self.ref} at {commit[:12]}"
        if blob is None:
            raise Corrupt(f"{where}: commit holds no {RECORD_FILE}")
        record = decode(blob, source=where, key=self.key)
        if record.brief != self.brief:
            raise Corrupt(f"{where}: record names brief {record.brief!r}, not {self.brief!r}")
        return record


@dataclass
class EvidenceLog:
    """A brief's validated evidence records, oldest first, and the ref tip they end at."""

    brief: str
    tip: str | None
    records: list[EvidenceRecord] = field(default_factory=list)

    @property
    def last_digest(self) -> str:
        return self.records[-1].digest if self.records else ""


def _seen_file(forge: Forge, brief: str) -> Path:
    return forge.state_dir / "assay-evidence-seen" / brief


def _remember(forge: Forge, brief: str, tip: str) -> None:
    path = _seen_file(forge, brief)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{brief}.{os.getpid()}.tmp")
    tmp.write_text(tip + "\n")
    os.replace(tmp, path)


def _check_extends_seen(forge: Forge, brief: str, tip: str | None, *, source: str) -> None:
    path = _seen_file(forge, brief)
    if not path.is_file():
        return
    seen = path.read_text().strip()
    if not seen or seen == tip:
        return
    if tip is None:
        raise Corrupt(f"{source}: the evidence ref was deleted (this gate saw it at {seen[:12]})")
    if not forge.has_commit(seen):
        return  # the cache lost the object; nothing to compare against
    if not forge.is_ancestor(seen, tip):
        raise Corrupt(
            f"{source}: the evidence history was rewritten: {seen[:12]}, seen before, "
            f"is no longer an ancestor of the tip {tip[:12]}"
        )


def decode_records(
    brief: str, reader: ObjectReader, tip: str | None, *, key: PublicKey | None
) -> list[EvidenceRecord]:
    """The evidence log from ``tip``, read by the records layer's walker and checked, for
    the gate's read and the forge's read model alike. ``Corrupt`` unless each commit is the
    single-parent child of the one before it (a merge or a grafted history is an edit),
    holds a record the evidence decoder accepts (its digest, and ``key``'s signature when
    given) for this brief, and chains to the record before it."""
    source = evidence_ref(brief)
    records: list[EvidenceRecord] = []
    previous: str | None = None
    for index, link in enumerate(chain(reader, source, tip, RECORD_FILE)):
        sha, parents, data = link.commit, link.parents, link.data
        if list(parents) != ([previous] if previous else []):
            raise Corrupt(
                f"{source}: evidence commit {sha[:12]} (record {index}) is not a single-parent "
                "child of the record before it: the evidence history was edited"
            )
        previous = sha
        where = f"{source} record {index} ({sha[:12]})"
        if data is None:
            raise Corrupt(f"{where}: commit holds no {RECORD_FILE}")
        record = decode(data, source=where, key=key)
        if record.brief != brief:
            raise Corrupt(f"{where}: record names brief {record.brief!r}, not {brief!r}")
        records.append(record)
    check_chain(records, source=source)
    return records


def read_log(
    forge: Forge, brief: str, *, tip: str | None, key: PublicKey | None = None
) -> EvidenceLog:
    """Validate and return every record up to ``tip`` (already fetched into the cache)."""
    source = evidence_ref(brief)
    _check_extends_seen(forge, brief, tip, source=source)
    log = EvidenceLog(brief=brief, tip=tip)
    if tip is None:
        return log
    with forge.batch() as reader:
        log.records.extend(decode_records(brief, reader, tip, key=key))
    _remember(forge, brief, tip)
    return log


def fetch_log(forge: Forge, brief: str, *, key: PublicKey | None = None) -> EvidenceLog:
    """Fetch the evidence ref (one round trip) and validate it."""
    ref = evidence_ref(brief)
    tip = forge.refresh([ref]).get(ref)
    return read_log(forge, brief, tip=tip, key=key)


def append_records(
    forge: Forge,
    brief: str,
    records: Sequence[EvidenceRecord],
    *,
    key: GateKey | None = None,
    log: EvidenceLog | None = None,
) -> EvidenceLog:
    """Chain, seal and push ``records`` after the current tip (CAS, re-chained on a lost race).

    Returns the log as it stands after the push. ``log`` is a log just read, saving a fetch.
    """
    public = key.public if key is not None else None
    if not records:
        return log if log is not None else fetch_log(forge, brief, key=public)
    current: EvidenceLog | None = log
    sealed: list[EvidenceRecord] = []

    codec = EvidenceCodec(brief, key=public)

    def build(again: bool) -> Stage:
        """The records chained and sealed after the log's tip (read again after a lost
        race: another gate appended first, so they chain after its records)."""
        nonlocal current
        if again or current is None:
            current = fetch_log(forge, brief, key=public)
        prev = current.last_digest
        sealed.clear()
        stage = Stage(forge)
        for record in records:
            stamped = seal(record, prev=prev, key=key)
            stage.record(
                codec,
                stamped,
                on=current.tip,
                author=Identity(name=_identity_name(stamped.verifier), email="gate@assay.invalid"),
                message=f"evidence {brief}/{stamped.row}: "
                f"{'pass' if stamped.passed else 'fail'} at {stamped.head_sha[:12]}",
            )
            sealed.append(stamped)
            prev = stamped.digest
        return stage

    policy = WritePolicy(attempts=_APPEND_ATTEMPTS, what="evidence")
    tip = write(forge, build, policy=policy).stage.tip(codec.ref)
    assert tip is not None
    _remember(forge, brief, tip)
    assert current is not None
    return EvidenceLog(brief=brief, tip=tip, records=[*current.records, *sealed])


def _identity_name(verifier: str) -> str:
    cleaned = "".join(ch for ch in verifier if ch not in "<>\n\r\0").strip()
    return cleaned or "gate"
