"""Filling a ``ForgeSnapshot`` from a forge: one fetch, then local reads from its cache.

Every ref the board, the sweepers, the desks and the gate look at (main, branches, journal
and run refs, claims, events, evidence, reviews, status and holdout records) comes down in
one ``fetch``: one round trip whatever the number of briefs (``only_brief``: one brief's
refs, the same read narrowed). Everything after that is read from the forge's objects
through one in-process object reader (``forge.batch()``: libgit2 over the git forge's cache,
or ``MemoryForge``'s dicts), walked by the records layer's walker and decoded by each
record's codec (``assay.forge.records``); a brief's journal is read at its checkpoint
(``checkpoint_tips``: its journal ref, its run ref once merged, or its branch) and checked
by the journal's one checker.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import assay.refs as refs
from assay.errors import AssayError
from assay.evidence.anchors import anchor_problem
from assay.forge.records import ObjectReader, RecordBackend, chain
from assay.forgestate.snapshot import (
    BriefInfo,
    ClaimInfo,
    EventInfo,
    EvidenceInfo,
    ForgeSnapshot,
    JournalInfo,
    checkpoint_tips,
    journal_info,
)
from assay.forgestate.status import status_problem
from assay.forgestate.times import parse_time
from assay.refs import (
    BRANCHES,
    CLAIMS,
    EVENTS,
    EVIDENCE,
    FETCH_ALL,
    HOLDOUT,
    JOURNALS,
    MAIN,
    REVIEWS,
    RUNS,
    STATUS,
)

if TYPE_CHECKING:
    from assay.desks.records.events import Untrusted
    from assay.evidence.keys import PublicKey

    # How a brief's events are checked: None (only a person writes them), or signed with.
    EventKey = PublicKey | Untrusted | None


class SnapshotBackend(RecordBackend, Protocol):
    """What the read model reads a forge by: the records layer's backend (``refresh``, an
    object reader), ancestry and paths for telling merged branches, and where local state
    may be cached. The git forge and ``assay.forge.memory.MemoryForge`` both answer it."""

    url: str
    display_url: str
    protects_custom_refs: bool

    @property
    def state_dir(self) -> Path | None: ...

    def has_commit(self, sha: str) -> bool: ...

    def reached_from(self, main: str, tips: Sequence[str]) -> list[str]: ...

    def has_paths(self, wanted: Sequence[tuple[str, str]]) -> list[bool]: ...


def record_of(batch: ObjectReader, sha: str) -> Any:
    """The ``record.json`` a ``RefLog`` commit holds (a status record), or None."""
    data = batch.blob(f"{sha}:record.json")
    try:
        return json.loads(data.decode("utf-8")) if data is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None


def _suffix(ref: str, prefix: str) -> str:
    return ref[len(prefix) :]


def journal_entries(
    batch: ObjectReader, sha: str, brief: str
) -> tuple[list[dict[str, Any]], str, str]:
    """The journal lines at checkpoint ``sha`` (segments in order), its head, and a problem.

    Checked by the journal's one checker (``assay.journal.reader.verify_segments``: each
    line's sum, the chain, the sequence, the segments' continue lines), without the blobs
    (the board reads no payload). A torn last line (a crash mid-append) is dropped; the
    first bad line stops reading there and is reported as the problem, the lines before it
    kept for the row's figures."""
    from assay.journal.reader import SEGMENT_PATTERN, Journal, verify_segments

    tree = batch.tree(f"{sha}:.assay/journal/{brief}")
    journal = Journal(directory=Path(".assay/journal", brief))
    names = sorted(name for name in tree or {} if SEGMENT_PATTERN.match(name))
    assert tree is not None or not names
    segments = ((name, batch.blob(tree[name][1]) or b"") for name in names if tree)
    try:
        verify_segments(journal, segments, blobs=None)
    except AssayError as bad:
        return journal.entries, journal.head, f"corrupt: {bad.message}"
    return journal.entries, journal.head, ""


# Bumped whenever a cache entry gains a field: an older cache is parsed again.
BRIEF_CACHE_VERSION = 2


def _brief_cache_path(cache: Path) -> Path:
    return Path(cache) / "assay-board" / "briefs.json"


def _load_brief_cache(cache: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(_brief_cache_path(cache).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("v") == BRIEF_CACHE_VERSION else {}


def _save_brief_cache(cache: Path, entries: dict[str, dict[str, Any]]) -> None:
    path = _brief_cache_path(cache)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(
            json.dumps({**entries, "v": BRIEF_CACHE_VERSION}, sort_keys=True), encoding="utf-8"
        )
        os.replace(temporary, path)
    except OSError:
        pass  # only a cache: the next board parses again


def _brief_infos(batch: ObjectReader, main: str, cache: Path | None = None) -> dict[str, BriefInfo]:
    """Every brief on main. Parsed briefs are cached by blob sha beside the forge's cache:
    a blob's content never changes, and parsing 1,000 briefs costs seconds."""
    from assay.briefs import is_brief_path, parse_brief

    cached = _load_brief_cache(cache) if cache is not None else {}
    used: dict[str, dict[str, Any]] = {}
    found: dict[str, BriefInfo] = {}
    tree = batch.tree(f"{main}:briefs") if main else None
    for name, (mode, sha) in sorted((tree or {}).items()):
        if not mode.startswith("100") or not is_brief_path(name):
            continue
        key = f"{sha}:{name}"
        entry = cached.get(key)
        if not isinstance(entry, dict):
            entry = _parse_brief_blob(batch, name, sha, parse_brief)
        used[key] = entry
        info = BriefInfo(
            id=str(entry["id"]),
            title=str(entry.get("title", "")),
            desk=str(entry.get("desk", "")),
            rows=tuple(str(row) for row in entry.get("rows", [])),
            commands=tuple(str(command) for command in entry.get("commands", [])),
            problem=str(entry.get("problem", "")),
        )
        if info.problem:
            found.setdefault(info.id, info)
        else:
            found[info.id] = info
    if cache is not None and used != {k: v for k, v in cached.items() if k != "v"}:
        _save_brief_cache(cache, used)
    return found


def _parse_brief_blob(
    batch: ObjectReader, name: str, sha: str, parse: Callable[..., Any]
) -> dict[str, Any]:
    source = f"briefs/{name}"
    data = batch.blob(sha) or b""
    try:
        brief = parse(data.decode("utf-8"), source=source)
    except (AssayError, UnicodeDecodeError) as bad:
        return {"id": name[: -len(".md")], "problem": str(bad)}
    return {
        "id": brief.id,
        "title": brief.title,
        "desk": brief.desk or "",
        "rows": [row.id for row in brief.verify],
        "commands": [row.run for row in brief.verify],
    }


def _templates(batch: ObjectReader, main: str) -> dict[str, str]:
    tree = batch.tree(f"{main}:board_templates") if main else None
    found: dict[str, str] = {}
    for name, (mode, sha) in sorted((tree or {}).items()):
        if mode.startswith("100") and name.endswith(".j2"):
            data = batch.blob(sha)
            if data is not None:
                found[name] = data.decode("utf-8", errors="replace")
    return found


def _evidence(
    batch: ObjectReader, sha: str, brief: str, key: PublicKey | None
) -> list[EvidenceInfo]:
    """Every record on the brief's evidence ref, oldest first, read by the evidence log's
    own walker (``decode_records``: a linear history, each record's digest, brief and
    chain, and the gate's signature when there is a ``key``), as the gate reads it: a log
    it refuses is ``Corrupt``, and the brief is shown ``invalid``."""
    # Imported here: the waker reads snapshots too, and never evidence.
    from assay.evidence.store import decode_records

    return [
        EvidenceInfo(
            row=record.row,
            passed=record.passed,
            head_sha=record.head_sha,
            at=record.at,
            record=record,
        )
        for record in decode_records(brief, batch, sha, key=key)
    ]


def _claim(batch: ObjectReader, ref: str, sha: str) -> ClaimInfo:
    """The claim at ``sha``, decoded by the claim codec (the claims module's own)."""
    from assay.claims.record import ClaimCodec

    codec = ClaimCodec(_suffix(ref, CLAIMS))
    return ClaimInfo.from_record(codec.parse(sha, batch.blob(f"{sha}:{codec.path}")))


def _review(batch: ObjectReader, ref: str, sha: str) -> Any:
    """The review record at ``sha``, decoded by the review codec (the gate's decoder)."""
    from assay.evidence.reviews import ReviewCodec

    codec = ReviewCodec(_suffix(ref, REVIEWS))
    return codec.parse(sha, batch.blob(f"{sha}:{codec.path}"))


def _events(
    batch: ObjectReader, ref: str, sha: str, notes: list[str], signed_by: EventKey
) -> list[EventInfo]:
    """Every event on the ref, oldest first, each checked by the desk's events decoder
    (``decode_event``: bounds, fields, and the events job's signature where any job may
    write the ref).

    A malformed, oversized or unsigned record is skipped, as the desk's own reader skips
    it: it is never delivered, so no sweep may wake a brief for it, and it does not stop the
    brief's other events (anyone who can push an event could otherwise wedge the brief).
    ``notes`` gets one line per skipped record, naming the ref, the commit and why."""
    from assay.desks.records.events import decode_event, events_codec

    codec = events_codec(_suffix(ref, EVENTS))
    found: list[EventInfo] = []
    for link in chain(batch, ref, sha, codec.path):
        try:
            event = decode_event(codec, link.commit, link.data, signed_by=signed_by)
        except AssayError as bad:
            notes.append(f"skipped: {bad.message}")
            continue
        found.append(
            EventInfo(
                id=event.id,
                kind=event.kind,
                at=parse_time(event.at),
                actor=event.actor,
                data=dict(event.data),
                record=event,
            )
        )
    return found


@dataclass
class _Parts:
    """What the per-ref readers fill, brief by brief."""

    claims: dict[str, ClaimInfo] = field(default_factory=dict)
    journals: dict[str, JournalInfo] = field(default_factory=dict)
    evidence: dict[str, list[EvidenceInfo]] = field(default_factory=dict)
    reviews: dict[str, str] = field(default_factory=dict)
    review_states: dict[str, str] = field(default_factory=dict)
    review_heads: dict[str, str] = field(default_factory=dict)
    events: dict[str, list[EventInfo]] = field(default_factory=dict)
    statuses: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    invalid: dict[str, AssayError] = field(default_factory=dict)
    event_notes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    holdout: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


_PREFIXES = (CLAIMS, EVIDENCE, REVIEWS, EVENTS, STATUS, HOLDOUT)


# Records this process decoded, by the ref and commit they were read from (and the gate key
# that checked them): a commit never changes, so a long-running desk's next view decodes only
# the refs that moved. Without it, each of a fleet's views decodes every brief's claim,
# review, events and evidence, and the fleet's reads grow with the square of its briefs.
# Bounded: dropped whole when full, as the desks' parsed briefs are.
_DECODED: dict[tuple[str, str, str], Any] = {}
_DECODED_MAX = 50_000


def _decoded(key: tuple[str, str, str], decode: Callable[[], Any]) -> Any:
    """``decode()``'s answer (or its ``AssayError``, raised again) for ``key``, once."""
    if key in _DECODED:
        found = _DECODED[key]
    else:
        if len(_DECODED) >= _DECODED_MAX:
            _DECODED.clear()
        try:
            found = decode()
        except AssayError as error:
            found = error
        _DECODED[key] = found
    if isinstance(found, AssayError):
        raise found.with_traceback(None)
    return found


def _reader_key(forge: Any, known: Mapping[str, str]) -> PublicKey | None:
    # Imported here, as the records' decoder is: the waker reads snapshots too, never evidence.
    from assay.evidence.trust import reader_key

    try:
        return reader_key(forge, known=known)
    except AssayError:  # a malformed settings record: signatures are seen, not checked
        return None


def _read_ref(
    batch: ObjectReader,
    parts: _Parts,
    ref: str,
    sha: str,
    *,
    evidence_key: Callable[[], PublicKey | None],
    events_key: Callable[[], EventKey],
) -> None:
    """Decode one ref's record(s) with its owner's decoder; a failure marks its brief."""
    prefix = next((p for p in _PREFIXES if ref.startswith(p)), None)
    if prefix is None:
        return
    brief = _suffix(ref, prefix)
    try:
        if prefix == CLAIMS:
            parts.claims[brief] = _decoded((ref, sha, ""), lambda: _claim(batch, ref, sha))
        elif prefix == EVIDENCE:
            key = evidence_key()
            key_id = key.fingerprint if key else ""
            found = _decoded((ref, sha, key_id), lambda: tuple(_evidence(batch, sha, brief, key)))
            parts.evidence[brief] = list(found)
        elif prefix == EVENTS:
            signed_by = events_key()
            key_id = "" if signed_by is None else getattr(signed_by, "fingerprint", "no key")
            events, notes = _decoded(
                (ref, sha, key_id), lambda: _events_and_notes(batch, ref, sha, signed_by)
            )
            parts.events[brief] = list(events)
            if notes:
                parts.event_notes[brief] = notes
        elif prefix == REVIEWS:
            parts.reviews[brief] = sha
            review = _decoded((ref, sha, ""), lambda: _review(batch, ref, sha))
            parts.review_states[brief], parts.review_heads[brief] = review.state, review.head_sha
        elif prefix == HOLDOUT:
            parts.holdout[brief] = _decoded((ref, sha, ""), lambda: _holdout(batch, ref, sha))
        elif prefix == STATUS:
            status = _decoded((ref, sha, ""), lambda: _status(batch, sha))
            if status is not None:
                parts.statuses[brief] = status
    except AssayError as error:
        parts.invalid[brief] = error


def _read_journal(batch: ObjectReader, parts: _Parts, brief: str, checkpoint: str) -> None:
    """The journal at the brief's checkpoint (``checkpoint_tips``: its journal ref, its
    kept run ref once merged, or its branch), against the anchor its claim records."""
    entries, head, problem = journal_entries(batch, checkpoint, brief)
    claim = parts.claims.get(brief)
    if not problem and claim is not None and claim.record is not None:
        problem = anchor_problem(claim.record.to_json(), entries, head, claim_sha=claim.sha)
    if entries or problem:
        parts.journals[brief] = journal_info(entries, head=head, problem=problem)


def _events_and_notes(
    batch: ObjectReader, ref: str, sha: str, signed_by: EventKey
) -> tuple[tuple[EventInfo, ...], tuple[str, ...]]:
    notes: list[str] = []
    events = _events(batch, ref, sha, notes, signed_by)
    return tuple(events), tuple(notes)


def _holdout(batch: ObjectReader, ref: str, sha: str) -> tuple[tuple[str, str], ...]:
    """The holdout rows' ids and digests (never more: the board holds no key)."""
    from assay.evidence.holdout import row_specs_of

    specs = row_specs_of(record_of(batch, sha), source=f"{ref} {sha[:12]}")
    return tuple((spec.id, spec.command) for spec in specs)


def _status(batch: ObjectReader, sha: str) -> Mapping[str, Any] | None:
    """The status record at ``sha`` as the board shows it (a refused one: ``invalid``)."""
    raw = record_of(batch, sha)
    if not isinstance(raw, Mapping):
        return None
    problem = status_problem(raw)  # the status decoder: quarantined, never 70
    if problem:
        return {"v": 1, "state": "invalid", "note": f"status record refused: {problem}"}
    return raw


def snapshot_from_cache(
    url: str,
    forge: SnapshotBackend,
    refs: Mapping[str, str],
    *,
    round_trips: int = 1,
    journals: bool = True,
    briefs: bool = True,
) -> ForgeSnapshot:
    """Read a snapshot of ``refs`` (already fetched into ``forge``'s cache); without
    ``briefs``, main's briefs and board templates are not read (a desk's view parses main's
    briefs itself, as ``Brief``s)."""
    parts = _Parts()
    main = refs.get(MAIN, "")
    with forge.batch() as batch:
        infos = _brief_infos(batch, main, forge.state_dir) if briefs else {}
        templates = _templates(batch, main) if briefs else {}
        # The key the forge vouches for: read once, and only if an evidence ref is read.
        evidence_key = functools.cache(lambda: _reader_key(forge, refs))

        def events_key() -> EventKey:
            """None where only a person writes events (the push rule); else the key the
            events job signs with, and with none known, no event counts."""
            if forge.protects_custom_refs:
                return None
            from assay.desks.records.events import NO_KEY

            return evidence_key() or NO_KEY

        for ref, sha in sorted(refs.items()):
            _read_ref(batch, parts, ref, sha, evidence_key=evidence_key, events_key=events_key)
        if journals:  # after the claims: each journal is held to its claim's anchor
            for brief, checkpoint in sorted(checkpoint_tips(refs).items()):
                _read_journal(batch, parts, brief, checkpoint)
    checked_by = evidence_key() if parts.evidence else None
    return ForgeSnapshot(
        url=url,
        main=main,
        refs=dict(refs),
        briefs=infos,
        templates=templates,
        round_trips=round_trips,
        evidence_key=checked_by.fingerprint if checked_by else "",
        **vars(parts),
    )


def brief_refs(brief: str) -> list[str]:
    """Every ref (or prefix) one brief's records live on, main, and the settings record
    (which key checks its evidence): what the many-brief read fetches of it, and all the
    one-brief read does."""
    return [
        MAIN,
        refs.CONFIG,
        refs.claim_ref(brief),
        refs.events_ref(brief),
        refs.status_ref(brief),
        refs.evidence_ref(brief),
        refs.review_ref(brief),
        refs.holdout_ref(brief),
        refs.branch_ref(brief),
        refs.journal_ref(brief),
        refs.runs_of(brief),
    ]


def read_snapshot(
    forge: SnapshotBackend,
    *,
    only_brief: str | None = None,
    journals: bool = True,
    briefs: bool = True,
    extra_briefs: bool = True,
) -> ForgeSnapshot:
    """Fetch once and read a snapshot of ``forge``: every ref, or with ``only_brief`` that
    brief's (``brief_refs``: the same read, narrowed, whose every object is fetched);
    ``journals=False``: no journal read, and other briefs' branches, journals and runs only
    listed (a desk's view); ``briefs=False``: without main's briefs and templates (see
    ``snapshot_from_cache``)."""
    from assay.branch import merged_branches

    if only_brief is None:
        wanted: list[str] = list(FETCH_ALL)
        # Without journals (a desk's view) other briefs' branches are only listed: their
        # tips are what a view decides by, and merged_branches needs no object a main the
        # cache holds does not reach.
        listed_only = () if journals else (BRANCHES, JOURNALS, RUNS)
    else:
        wanted, listed_only = brief_refs(only_brief), ()
    fetched = forge.refresh(wanted, listed_only=listed_only)
    branches = {
        _suffix(ref, BRANCHES): sha for ref, sha in fetched.items() if ref.startswith(BRANCHES)
    }
    main = fetched.get(MAIN)
    journal_tips = {
        _suffix(ref, JOURNALS): sha for ref, sha in fetched.items() if ref.startswith(JOURNALS)
    }
    merged = merged_branches(forge, branches, main, journal_tips) if main else set()
    snapshot = snapshot_from_cache(
        forge.display_url,
        forge,
        fetched,
        round_trips=1,
        journals=journals,
        briefs=briefs,
    )
    snapshot = replace(snapshot, merged=frozenset(merged))
    return with_extra_briefs(snapshot, forge) if extra_briefs else snapshot


def with_extra_briefs(snapshot: ForgeSnapshot, forge: Any) -> ForgeSnapshot:
    """Add the briefs a forge has beyond ``briefs/`` on main (GitHub issues labelled assay).

    Without them, an issue brief's claim and branch would look like orphans to a sweep (and
    ``--fix`` would delete them), and the board would not list the brief. A file on main
    with the same id wins, as it does for desks.
    """
    extra = getattr(forge, "extra_briefs", None)
    if extra is None:
        return snapshot
    found, bad = extra()
    briefs = dict(snapshot.briefs)
    for brief_id, brief in found.items():
        briefs.setdefault(
            brief_id,
            BriefInfo(
                id=brief.id,
                title=brief.title,
                desk=brief.desk or "",
                rows=tuple(row.id for row in brief.verify),
                commands=tuple(row.run for row in brief.verify),
            ),
        )
    for source, error in bad.items():
        brief_id = str(error.details.get("brief") or source.replace("issue #", "issue-"))
        briefs.setdefault(brief_id, BriefInfo(id=brief_id, problem=str(error)))
    return replace(snapshot, briefs=briefs, round_trips=snapshot.round_trips + 1)
