"""Append-only logs of small versioned JSON records, one ref each (events, evidence, ...).

A :class:`RefLog` is a ref whose first-parent history is the log: every commit's tree
holds exactly one record file, ``record.json`` holding ``{"v": <format version>, "kind":
<log kind>, ...}``, except where a log's writer fixed another shape first: review records
are ``review.json`` without a ``kind`` field (``assay.desks.records.review``), and
``RefLog.for_brief`` reads and writes each brief log in its writer's shape (``LOG_FILES``).
Appending is a compare-and-swap push of a child commit; a lost race re-reads the tip and
appends again on top (an append never replaces anyone's record). Every read validates
every record and reports the first bad one as ``Corrupt`` naming the ref and the commit.

Refs used by Assay: ``refs/assay/events/<brief>``, ``refs/assay/evidence/<brief>``,
``refs/assay/reviews/<brief>``, ``refs/assay/status/<brief>``, ``refs/assay/sweeps/log``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import assay.refs as refs
from assay.errors import BadInput, Busy, Corrupt
from assay.ids import check_id
from assay.plumbing import GitError, Identity, PushResult, RefUpdate

RECORD_PATH = "record.json"
BRIEF_LOGS = ("events", "evidence", "reviews", "status")

# The record file of each brief log, as the module that writes the log names it.
LOG_FILES: dict[str, str] = {
    "events": RECORD_PATH,
    "evidence": RECORD_PATH,
    "reviews": "review.json",  # assay.desks.records.review.REVIEW_FILE (a test keeps them equal)
    "status": RECORD_PATH,
}
# Logs whose records carry no ``kind`` field (the review record's format has none).
KINDLESS_LOGS = frozenset({"reviews"})

Validator = Callable[[dict[str, Any]], None]


class RecordBackend(Protocol):
    """What a record log asks of a forge: the git forge (``assay.forge.base.Forge``) and
    the in-memory one of the record tests (``assay.forge.memory.MemoryForge``) both answer
    it, by the same compare-and-swap rules."""

    def refresh(
        self, refs: str | Sequence[str], *, listed_only: Sequence[str] = ()
    ) -> dict[str, str]: ...

    def history(self, tip: str, *, limit: int | None = None) -> list[str]: ...

    def read_blob(self, commit: str, path: str) -> bytes | None: ...

    def read_blobs(self, wanted: Sequence[tuple[str, str]]) -> list[bytes | None]: ...

    def commit(
        self,
        files: Mapping[str, bytes],
        *,
        parents: Sequence[str],
        message: str,
        author: Identity,
        committer: Identity | None = None,
    ) -> str: ...

    def push(self, updates: Sequence[RefUpdate], *, atomic: bool = True) -> PushResult: ...


@dataclass(frozen=True)
class RecordCodec:
    """How one log's records are checked, decoded and encoded, apart from any forge: a
    server reading its own repository decodes with it as a log's reader does.

    ``validate`` (optional) checks a record's own fields and raises ``ValueError``,
    ``KeyError``, ``TypeError`` or ``BadInput``; decoding turns that into ``Corrupt`` naming
    ``ref`` and the commit, encoding into ``BadInput``. ``path`` is the record's file name
    in each commit; with ``stamp_kind=False`` records carry no ``kind`` field (one that is
    present must still match).
    """

    ref: str
    kind: str
    version: int = 1
    validate: Validator | None = None
    path: str = RECORD_PATH
    stamp_kind: bool = True

    def parse(self, commit: str, blob: bytes | None) -> dict[str, Any]:
        """The record ``blob`` holds (``Corrupt`` naming the ref and ``commit``)."""
        where = f"{self.ref} at {commit[:12]}"
        if blob is None:
            raise Corrupt(f"{where}: the commit holds no {self.path}", ref=self.ref)
        try:
            record = json.loads(blob)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise Corrupt(f"{where}: {self.path} is not JSON: {exc}", ref=self.ref) from exc
        except RecursionError:
            raise Corrupt(f"{where}: {self.path} is nested too deeply", ref=self.ref) from None
        try:
            self.check(record)
        except BadInput as exc:
            raise Corrupt(f"{where}: {exc.message}", ref=self.ref) from exc
        return dict(record)

    def check(self, record: Any) -> None:
        """Raise ``BadInput`` unless ``record`` is a valid record of this log."""
        if not isinstance(record, dict):
            raise BadInput(f"{self.path} must be a JSON object")
        if record.get("v") != self.version:
            raise BadInput(f"field 'v' is {record.get('v')!r}, this Assay reads v{self.version}")
        if (self.stamp_kind or "kind" in record) and record.get("kind") != self.kind:
            raise BadInput(f"field 'kind' is {record.get('kind')!r}, expected {self.kind!r}")
        if self.validate is not None:
            try:
                self.validate(record)
            except BadInput:
                raise
            except (ValueError, KeyError, TypeError) as exc:
                raise BadInput(f"invalid record: {exc}") from exc

    def encode(self, record: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """``record`` with ``v`` (and ``kind``) filled in, and its canonical bytes;
        ``BadInput`` naming the ref when it is not a valid record (nothing is written)."""
        full = {**record, "v": self.version}
        if self.stamp_kind:
            full["kind"] = self.kind
        try:
            self.check(full)
            payload = json.dumps(full, sort_keys=True, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            raise BadInput(f"{self.ref}: record cannot be stored: {exc}") from exc
        except BadInput as exc:
            raise BadInput(f"{self.ref}: {exc.message}") from exc
        return full, payload


def cas_write(
    forge: RecordBackend,
    ref: str,
    build: Callable[[bool], tuple[str | None, str]],
    *,
    attempts: int,
    what: str = "append",
) -> str:
    """The record layer's one lost-race policy: push what ``build`` made as a compare-and-
    swap of ``ref``; when another writer moved it first, build again and push again.

    ``build(again)`` returns ``(expected tip, new tip)``: the commit(s) written on the tip
    the writer believes (``again``: a race was just lost, so read the ref afresh first).
    A push refused for any other reason is ``GitError``; ``attempts`` races lost in a row
    are ``Busy``. A writer never replaces a record another wrote: it rebuilds on top."""
    for attempt in range(attempts):
        expected, new = build(attempt > 0)
        result = forge.push([RefUpdate(ref, new, expected=expected)])
        if result.ok:
            return new
        if not result.lost:
            raise GitError(f"{ref}: {what} refused: {result.detail}")
    raise Busy(f"{ref}: lost {attempts} {what} races in a row; try again")


@dataclass(frozen=True)
class LogEntry:
    """One record of a log and the commit that holds it."""

    commit: str
    record: dict[str, Any]


class RefLog:
    """An append-only log of versioned JSON records on one ref of a forge, in the shape
    its :class:`RecordCodec` checks (the options past ``ref`` are the codec's)."""

    def __init__(
        self,
        forge: RecordBackend,
        ref: str,
        *,
        kind: str,
        version: int = 1,
        validate: Validator | None = None,
        path: str = RECORD_PATH,
        stamp_kind: bool = True,
    ) -> None:
        if not ref.startswith("refs/"):
            raise BadInput(f"{ref!r} is not a full ref name")
        self.forge = forge
        self.ref = ref
        self.codec = RecordCodec(
            ref, kind, version=version, validate=validate, path=path, stamp_kind=stamp_kind
        )
        self.kind = kind
        self.path = path
        self._tip: str | None = None
        self._known = False

    @classmethod
    def of(cls, forge: RecordBackend, codec: RecordCodec) -> RefLog:
        """The log on ``codec.ref`` of ``forge``, in the shape ``codec`` checks."""
        return cls(
            forge,
            codec.ref,
            kind=codec.kind,
            version=codec.version,
            validate=codec.validate,
            path=codec.path,
            stamp_kind=codec.stamp_kind,
        )

    @classmethod
    def for_brief(
        cls,
        forge: RecordBackend,
        log: Literal["events", "evidence", "reviews", "status"],
        brief: str,
        **options: Any,
    ) -> RefLog:
        """The ``refs/assay/<log>/<brief>`` log (``kind`` defaults to ``log``), in the record
        file and shape its writer uses (``LOG_FILES``, ``KINDLESS_LOGS``)."""
        if log not in BRIEF_LOGS:
            raise BadInput(f"unknown brief log {log!r} (one of {', '.join(BRIEF_LOGS)})")
        check_id(brief)
        options.setdefault("kind", log)
        options.setdefault("path", LOG_FILES[log])
        options.setdefault("stamp_kind", log not in KINDLESS_LOGS)
        return cls(forge, refs.brief_log(log, brief), **options)

    # ------------------------------------------------------------------ reading

    def assume(self, tip: str | None) -> RefLog:
        """Take ``tip`` as the log's head, as a fetch the caller just made found it (None:
        the log was absent); the next read with ``fetch=False`` starts from it."""
        self._tip, self._known = tip, True
        return self

    def head(self, *, fetch: bool = True) -> str | None:
        """The commit at the tip of the log, or None for an empty (absent) log."""
        if fetch or not self._known:
            self._tip = self.forge.refresh([self.ref]).get(self.ref)
            self._known = True
        return self._tip

    def raw_entries(
        self, *, fetch: bool = True, after: str | None = None
    ) -> list[tuple[str, bytes | None]]:
        """``(commit, record bytes)`` oldest first, unparsed: for a reader that skips the
        records it refuses instead of failing on the first (the events log)."""
        tip = self.head(fetch=fetch)
        if tip is None:
            return []
        commits = self.forge.history(tip)
        if after is not None:
            if after not in commits:
                raise Corrupt(f"{self.ref}: commit {after[:12]} is no longer in the log")
            commits = commits[: commits.index(after)]
        commits.reverse()
        blobs = self.forge.read_blobs([(c, self.path) for c in commits])
        return list(zip(commits, blobs, strict=True))

    def entries(self, *, fetch: bool = True, after: str | None = None) -> list[LogEntry]:
        """Every record, oldest first (only those after commit ``after`` when given)."""
        return [
            LogEntry(commit, self.codec.parse(commit, blob))
            for commit, blob in self.raw_entries(fetch=fetch, after=after)
        ]

    def parse(self, commit: str, blob: bytes | None) -> dict[str, Any]:
        """One record as ``entries`` parses it (``Corrupt`` naming the commit)."""
        return self.codec.parse(commit, blob)

    def read(self, *, fetch: bool = True) -> list[dict[str, Any]]:
        """Every record, oldest first."""
        return [entry.record for entry in self.entries(fetch=fetch)]

    def latest(self, *, fetch: bool = True) -> dict[str, Any] | None:
        """The newest record (for logs read as "current status"), or None."""
        tip = self.head(fetch=fetch)
        if tip is None:
            return None
        return self.codec.parse(tip, self.forge.read_blob(tip, self.path))

    # ------------------------------------------------------------------ writing

    def append(
        self,
        record: dict[str, Any],
        *,
        author: Identity,
        message: str | None = None,
        max_attempts: int = 20,
    ) -> LogEntry:
        """Append one record (``v`` and ``kind`` are filled in); return it with its commit."""
        full, payload = self.codec.encode(record)
        summary = message or f"{self.kind} {self.ref.rsplit('/', 1)[-1]}"

        def build(again: bool) -> tuple[str | None, str]:
            tip = self.head(fetch=again)
            return tip, self._commit(payload, on=tip, message=summary, author=author)

        commit = cas_write(self.forge, self.ref, build, attempts=max_attempts)
        self._tip, self._known = commit, True
        return LogEntry(commit, full)

    def stage(
        self, record: dict[str, Any], *, on: str | None, author: Identity, message: str
    ) -> LogEntry:
        """Write the commit that appends ``record`` on tip ``on`` (None: the log's first)
        without pushing it, checked and encoded as ``append`` does: for a writer that
        carries it in a push of its own with other refs (a sweep's one atomic push), whose
        lost race is the whole push's."""
        full, payload = self.codec.encode(record)
        return LogEntry(self._commit(payload, on=on, message=message, author=author), full)

    def _commit(self, payload: bytes, *, on: str | None, message: str, author: Identity) -> str:
        return self.forge.commit(
            {self.path: payload}, parents=[on] if on else [], message=message, author=author
        )
