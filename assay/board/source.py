"""Filling a ``ForgeSnapshot`` from a forge: one fetch, then local reads from its cache.

Every ref the board and the sweepers look at (main, ``assay/*`` branches, claims, events,
evidence, reviews, status records) comes down in one ``fetch`` — one round trip whatever the
number of briefs — and everything after that is read from the forge's local cache through a
single ``git cat-file --batch`` process.

Record formats read here are the ones DESIGN §4-§6 and docs/internals.md pin: ``claim.json``
in the claim ref's tip commit, journal segments ``NNNNNN.jsonl`` under
``.assay/journal/<brief>/`` on ``assay/<brief>``, one evidence ``record.json`` per commit on
the evidence ref, and one JSON record per commit on the events and status refs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from assay.board.gitread import GitBatch
from assay.board.model import parse_time
from assay.board.snapshot import (
    BriefInfo,
    ClaimInfo,
    EventInfo,
    EvidenceInfo,
    ForgeSnapshot,
    JournalInfo,
    journal_info,
)
from assay.errors import AssayError

CLAIMS = "refs/assay/claims/"
EVENTS = "refs/assay/events/"
EVIDENCE = "refs/assay/evidence/"
REVIEWS = "refs/assay/reviews/"
STATUS = "refs/assay/status/"
BRANCHES = "refs/heads/assay/"
MAIN = "refs/heads/main"

# Records on one-record-per-commit refs may be named by the module that writes them; these
# are the names tried, in order, for the JSON record in each commit's tree.
RECORD_FILES = ("record.json", "event.json", "status.json", "claim.json")


@dataclass(frozen=True)
class Commit:
    tree: str
    parents: tuple[str, ...]


def read_commit(batch: GitBatch, sha: str) -> Commit | None:
    found = batch.read(sha)
    if not found or found[0] != "commit":
        return None
    tree = ""
    parents: list[str] = []
    for line in found[1].split(b"\n"):
        if not line:
            break
        if line.startswith(b"tree "):
            tree = line[5:].decode("ascii")
        elif line.startswith(b"parent "):
            parents.append(line[7:].decode("ascii"))
    return Commit(tree=tree, parents=tuple(parents))


def record_of(batch: GitBatch, sha: str, names: tuple[str, ...] = RECORD_FILES) -> Any:
    """The JSON record in commit ``sha``'s tree, or None."""
    for name in names:
        data = batch.blob(f"{sha}:{name}")
        if data is not None:
            try:
                return json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                return None
    return None


def history(batch: GitBatch, sha: str, *, limit: int = 10_000) -> Iterator[str]:
    """Commits from ``sha`` along first parents, newest first."""
    current: str | None = sha
    count = 0
    while current and count < limit:
        yield current
        count += 1
        commit = read_commit(batch, current)
        current = commit.parents[0] if commit and commit.parents else None


def _suffix(ref: str, prefix: str) -> str:
    return ref[len(prefix) :]


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def claim_from_json(brief: str, data: Any, *, sha: str) -> ClaimInfo:
    """A ``ClaimInfo`` from a ``claim.json`` object (DESIGN §5).

    The claims package's own decoder judges it first: a record it refuses (a lease of
    1e23 s, a fence past 2**53, a time past year 9999) is state ``invalid`` with the reason,
    for its brief alone, and never reaches the clock arithmetic below.
    """
    from assay.claims.record import validate

    try:
        validate(data)
    except (ValueError, OverflowError, RecursionError) as exc:
        return ClaimInfo(brief=brief, state="invalid", sha=sha, problem=str(exc)[:300])
    raw: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
    return ClaimInfo(
        brief=str(raw.get("brief") or brief),
        desk=str(raw.get("desk") or ""),
        holder=str(raw.get("holder") or ""),
        fence=_int(raw.get("fence")),
        state=str(raw.get("state") or ""),
        since=parse_time(raw.get("since")),
        renewed_at=parse_time(raw.get("renewed_at")),
        lease_s=_float(raw.get("lease_s")),
        waiting_for=str(raw.get("waiting_for") or ""),
        attempt=_int(raw.get("attempt")),
        sha=sha,
    )


def journal_entries(batch: GitBatch, sha: str, brief: str) -> tuple[list[dict[str, Any]], str, str]:
    """The journal lines on branch tip ``sha`` (segments in order), its head, and a problem.

    Each line's ``sum`` and the ``prev`` chain are checked, as the journal reader does (blobs
    are not: the board reads no payload). A torn last line (a crash mid-append) is dropped;
    any other bad line stops reading there and is reported as the problem.
    """
    from assay.journal.format import body_of, digest

    tree = batch.tree(f"{sha}:.assay/journal/{brief}")
    if tree is None:
        return [], "", ""
    entries: list[dict[str, Any]] = []
    prev = ""
    segments = sorted(name for name, (mode, _) in tree.items() if name.endswith(".jsonl"))
    for segment in segments:
        data = batch.blob(tree[segment][1]) or b""
        lines = data.split(b"\n")
        for index, line in enumerate(lines):
            if not line.strip():
                continue
            where = f"{segment} line {index + 1}"
            last = index == len(lines) - 1 and segment == segments[-1]
            split = body_of(line)
            if split is None or digest(split[0]) != split[1]:
                if last:
                    continue  # torn tail: the append was never acknowledged
                return entries, prev, f"corrupt: {where}: checksum mismatch"
            try:
                entry = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                return entries, prev, f"corrupt: {where}: not JSON"
            if not isinstance(entry, dict) or entry.get("prev", "") != prev:
                return entries, prev, f"corrupt: {where}: the hash chain is broken"
            prev = str(entry.get("sum", ""))
            entries.append(entry)
    return entries, prev, ""


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


def _brief_infos(batch: GitBatch, main: str, cache: Path | None = None) -> dict[str, BriefInfo]:
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
    batch: GitBatch, name: str, sha: str, parse: Callable[..., Any]
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


def _templates(batch: GitBatch, main: str) -> dict[str, str]:
    tree = batch.tree(f"{main}:board_templates") if main else None
    found: dict[str, str] = {}
    for name, (mode, sha) in sorted((tree or {}).items()):
        if mode.startswith("100") and name.endswith(".j2"):
            data = batch.blob(sha)
            if data is not None:
                found[name] = data.decode("utf-8", errors="replace")
    return found


def _evidence(batch: GitBatch, sha: str, brief: str) -> list[EvidenceInfo]:
    """Every record on the brief's evidence ref, oldest first, each checked by the evidence
    package's own decoder (digest, and the gate's signature when its key is here): a record
    it refuses is left out, so it can never show as verified."""
    # Imported here: the waker reads snapshots too, and never evidence.
    from assay.evidence.records import decode, gate_key

    try:
        key = gate_key()  # $ASSAY_EVIDENCE_KEY or the gate's key file, when this is the gate
    except AssayError:
        key = None  # an unreadable key file: signatures are seen, not checked
    records: list[EvidenceInfo] = []
    for commit in history(batch, sha):
        data = batch.blob(f"{commit}:record.json")
        if data is None:
            continue
        try:
            record = decode(data, source=f"{EVIDENCE}{brief} {commit[:12]}", key=key)
        except AssayError:
            continue
        records.append(
            EvidenceInfo(
                row=record.row,
                passed=record.passed,
                head_sha=record.head_sha,
                at=record.at,
                record=record,
            )
        )
    records.reverse()
    return records


def _valid_event(raw: Mapping[str, Any], where: str) -> bool:
    """The desk's own event decoder judges each record: a malformed or oversized one is
    skipped here as the desk skips it, so no sweep wakes a brief for it."""
    from assay.desks.events import MAX_RECORD_BYTES, validate_record
    from assay.errors import BadInput
    from assay.runtime import Event

    try:
        if len(json.dumps(raw, default=str)) > MAX_RECORD_BYTES:
            return False
        nested = raw.get("event")
        if isinstance(nested, Mapping):
            Event.from_json(dict(nested), where=where)
        else:
            validate_record(raw, where=where)
    except (BadInput, ValueError, TypeError, RecursionError):
        return False
    return True


def _events(batch: GitBatch, sha: str) -> list[EventInfo]:
    found: list[EventInfo] = []
    for commit in history(batch, sha):
        raw = record_of(batch, commit)
        if not isinstance(raw, Mapping) or not _valid_event(raw, commit):
            continue
        # The desk's event log stores the event's kind in ``event`` (``kind`` is the log's
        # own); a record may also nest the whole event object under ``event``.
        nested = raw.get("event")
        event: Mapping[str, Any] = nested if isinstance(nested, Mapping) else raw
        ident = event.get("id")
        kind = nested if isinstance(nested, str) else event.get("kind")
        if isinstance(ident, str) and isinstance(kind, str):
            found.append(
                EventInfo(
                    id=ident,
                    kind=kind,
                    at=parse_time(event.get("at")),
                    actor=str(event.get("actor", "")),
                    data=dict(event["data"]) if isinstance(event.get("data"), Mapping) else {},
                )
            )
    found.reverse()
    return found


def snapshot_from_cache(
    url: str,
    cache: Any,
    refs: Mapping[str, str],
    *,
    round_trips: int = 1,
    journals: bool = True,
    claim_decoder: Callable[[str, bytes, str], Any] | None = None,
) -> ForgeSnapshot:
    """Read a snapshot of ``refs`` (already fetched into ``cache``)."""
    briefs: dict[str, BriefInfo] = {}
    claims: dict[str, ClaimInfo] = {}
    journal_map: dict[str, JournalInfo] = {}
    evidence: dict[str, list[EvidenceInfo]] = {}
    reviews: dict[str, str] = {}
    review_states: dict[str, str] = {}
    review_heads: dict[str, str] = {}
    events: dict[str, list[EventInfo]] = {}
    statuses: dict[str, Mapping[str, Any]] = {}
    main = refs.get(MAIN, "")
    from assay.evidence.anchors import anchor_problem
    from assay.sweep.apply import status_problem

    claim_json: dict[str, tuple[Any, str]] = {}  # for the journal's anchor check
    with GitBatch(cache) as batch:
        briefs = _brief_infos(batch, main, Path(cache))
        templates = _templates(batch, main)
        for ref, sha in sorted(refs.items()):
            if ref.startswith(CLAIMS):
                brief = _suffix(ref, CLAIMS)
                data = batch.blob(f"{sha}:claim.json")
                try:
                    raw = json.loads(data) if data else None
                except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                    raw = None
                claim_json[brief] = (raw, sha)
                claim = claim_from_json(brief, raw, sha=sha)
                if claim_decoder is not None and data is not None:
                    claim = _with_record(claim, claim_decoder(brief, data, sha))
                claims[brief] = claim
            elif ref.startswith(BRANCHES) and journals:
                brief = _suffix(ref, BRANCHES)
                entries, head, problem = journal_entries(batch, sha, brief)
                if not problem and brief in claim_json:  # claims/ sorts before heads/
                    raw_claim, claim_sha = claim_json[brief]
                    problem = anchor_problem(raw_claim, entries, head, claim_sha=claim_sha)
                if entries or problem:
                    journal_map[brief] = journal_info(entries, head=head, problem=problem)
            elif ref.startswith(EVIDENCE):
                evidence[_suffix(ref, EVIDENCE)] = _evidence(batch, sha, _suffix(ref, EVIDENCE))
            elif ref.startswith(REVIEWS):
                reviews[_suffix(ref, REVIEWS)] = sha
                review = record_of(batch, sha, ("review.json", "record.json"))
                if isinstance(review, Mapping) and isinstance(review.get("state"), str):
                    review_states[_suffix(ref, REVIEWS)] = review["state"]
                if isinstance(review, Mapping) and isinstance(review.get("head_sha"), str):
                    review_heads[_suffix(ref, REVIEWS)] = review["head_sha"]
            elif ref.startswith(EVENTS):
                events[_suffix(ref, EVENTS)] = _events(batch, sha)
            elif ref.startswith(STATUS):
                raw = record_of(batch, sha)
                if isinstance(raw, Mapping):
                    problem = status_problem(raw)  # the status decoder: quarantine, not 70
                    statuses[_suffix(ref, STATUS)] = (
                        {"v": 1, "state": "invalid", "note": f"status record refused: {problem}"}
                        if problem
                        else raw
                    )
    return ForgeSnapshot(
        url=url,
        main=main,
        refs=dict(refs),
        briefs=briefs,
        claims=claims,
        journals=journal_map,
        evidence=evidence,
        reviews=reviews,
        review_states=review_states,
        review_heads=review_heads,
        events=events,
        statuses=statuses,
        templates=templates,
        round_trips=round_trips,
    )


def _with_record(claim: ClaimInfo, record: Any) -> ClaimInfo:
    from dataclasses import replace

    return replace(claim, record=record)


FETCH_ALL = ("refs/heads/", "refs/assay/")


def read_snapshot(
    forge: Any,
    *,
    only_brief: str | None = None,
    claim_decoder: Callable[[str, bytes, str], Any] | None = None,
) -> ForgeSnapshot:
    """Fetch once and read a snapshot of ``forge`` (only one brief's refs with ``only_brief``)."""
    if only_brief is None:
        wanted: list[str] = list(FETCH_ALL)
    else:
        wanted = [
            f"refs/assay/claims/{only_brief}",
            f"refs/assay/events/{only_brief}",
            f"refs/assay/status/{only_brief}",
            f"refs/heads/assay/{only_brief}",
        ]
    refs = forge.fetch(wanted)
    snapshot = snapshot_from_cache(
        str(getattr(forge, "display_url", forge.url)),
        forge.cache,
        refs,
        round_trips=1,
        claim_decoder=claim_decoder,
    )
    return with_extra_briefs(snapshot, forge)


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
