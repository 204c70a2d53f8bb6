"""The records layer: every record kind's codec, the one writer, the one walker.

A record log is a ref whose first-parent history is the log: every commit's tree holds
exactly one record file. Each log has one **codec** (``Codec``): the generic
``RecordCodec`` (``record.json`` holding ``{"v": <format version>, "kind": <log kind>,
...}``, checked by the log's validator) or a typed one beside its record class
(``assay.claims.record.ClaimCodec``, ``assay.evidence.reviews.ReviewCodec``,
``assay.evidence.store.EvidenceCodec``).

Every write goes through **one writer**, ``write``: a writer stages ref updates
(``Stage.record`` encodes a record with its codec and commits it on the tip it read;
``Stage.add``/``pin`` stage any other move) and ``write`` pushes them in ONE atomic push
with a compare-and-swap on every ref. What happens when another writer moved a ref first
is the ``WritePolicy``, the layer's one lost-race policy: by default an append builds
again on the fresh tips and pushes again (it never replaces anyone's record); a writer
whose lost race is an answer (a claim) refuses through its ``on_lost`` hook.

Every read goes through **one walker**, ``walk``: a log's commits along first parents,
oldest first, each decoded by its codec (``Corrupt`` naming the ref and the commit), on
any backend that answers ``RecordBackend``: the git forge, or ``MemoryForge``.

Refs used by Assay are named in ``assay.refs``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Literal, Protocol, Self, TypeVar

import assay.refs as refs
from assay.errors import AssayError, BadInput, Busy, Corrupt
from assay.ids import check_id
from assay.plumbing import GitError, Identity, PushResult, RefUpdate

RECORD_PATH = "record.json"
# The brief logs of generic records (reviews, claims and evidence have typed codecs).
BRIEF_LOGS = ("events", "evidence", "status")

Validator = Callable[[dict[str, Any]], None]
R = TypeVar("R")


class ObjectReader(Protocol):
    """Objects read in process by id or ``<commit>:<path>`` (``assay.forge.batch.GitBatch``
    over the forge's cache, ``assay.forge.memory.MemoryBatch``): what the walker reads."""

    def parents(self, sha: str) -> tuple[str, ...] | None: ...

    def blob(self, spec: str) -> bytes | None: ...

    def tree(self, spec: str) -> dict[str, tuple[str, str]] | None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class RecordBackend(Protocol):
    """What a record log asks of a forge: the git forge (``assay.forge.base.Forge``) and
    the in-memory one of the record tests (``assay.forge.memory.MemoryForge``) both answer
    it, by the same compare-and-swap rules."""

    def refresh(
        self, refs: str | Sequence[str], *, listed_only: Sequence[str] = ()
    ) -> dict[str, str]: ...

    def history(self, tip: str, *, limit: int | None = None) -> list[str]: ...

    def batch(self) -> ObjectReader: ...

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


class Codec(Protocol[R]):
    """How one log's records are stored: the ref, the file each commit holds, and the two
    directions. ``RecordCodec`` is the generic one (a JSON object with ``v`` and ``kind``);
    a record with a typed class of its own (a claim, a review) has a codec beside it."""

    @property
    def ref(self) -> str: ...

    @property
    def path(self) -> str: ...

    def encode(self, record: R) -> tuple[R, bytes]:
        """``record`` as stored and its bytes; ``BadInput`` naming the ref when invalid."""
        ...

    def parse(self, commit: str, blob: bytes | None) -> R:
        """The record ``blob`` (commit ``commit``'s file) holds; ``Corrupt`` naming both."""
        ...


@dataclass(frozen=True)
class RecordCodec:
    """How one log's records are checked, decoded and encoded, apart from any forge: a
    server reading its own repository decodes with it as a log's reader does.

    ``validate`` (optional) checks a record's own fields and raises ``ValueError``,
    ``KeyError``, ``TypeError`` or ``BadInput``; decoding turns that into ``Corrupt`` naming
    ``ref`` and the commit, encoding into ``BadInput``. ``path`` is the record's file name
    in each commit; with ``stamp_kind=False`` records carry no ``kind`` field (one that is
    present must still match). ``max_bytes`` bounds a record's file both ways.
    """

    ref: str
    kind: str
    version: int = 1
    validate: Validator | None = None
    path: str = RECORD_PATH
    stamp_kind: bool = True
    max_bytes: int | None = None

    def parse(self, commit: str, blob: bytes | None) -> dict[str, Any]:
        """The record ``blob`` holds (``Corrupt`` naming the ref and ``commit``)."""
        where = f"{self.ref} at {commit[:12]}"
        if blob is None:
            raise Corrupt(f"{where}: the commit holds no {self.path}", ref=self.ref)
        if self.max_bytes is not None and len(blob) > self.max_bytes:
            raise Corrupt(f"{where}: {self.path} is over {self.max_bytes} bytes", ref=self.ref)
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
        if self.max_bytes is not None and len(payload) > self.max_bytes:
            raise BadInput(f"{self.ref}: {self.path} would be over {self.max_bytes} bytes")
        return full, payload


@dataclass(frozen=True)
class LogEntry(Generic[R]):
    """One record of a log and the commit that holds it (read, or staged for a push)."""

    commit: str
    record: R


@dataclass(frozen=True)
class Link:
    """One commit of a log's chain: its parents and the bytes of the record file it holds."""

    commit: str
    parents: tuple[str, ...]
    data: bytes | None


def chain(
    reader: ObjectReader,
    ref: str,
    tip: str | None,
    path: str | None,
    *,
    after: str | None = None,
    limit: int | None = None,
) -> list[Link]:
    """The walker's reading half: the commits along ``tip``'s first parents, oldest first,
    each with its parents and the bytes of ``path`` (None: no file read), unparsed (for a
    reader that skips the records it refuses instead of failing on the first: the events
    log). ``after``: only the commits after that one (``Corrupt`` when it is no longer in
    the log); ``limit``: the newest that many. A commit missing from the objects is
    ``Corrupt``: a log is never read short."""
    links: list[Link] = []
    at, found = tip, after is None
    while at is not None and (limit is None or len(links) < limit):
        if at == after:
            found = True
            break
        parents = reader.parents(at)
        if parents is None:
            raise Corrupt(f"{ref}: commit {at[:12]} is missing from the objects read", ref=ref)
        links.append(Link(at, parents, reader.blob(f"{at}:{path}") if path else None))
        at = parents[0] if parents else None
    if not found:
        raise Corrupt(f"{ref}: commit {str(after)[:12]} is no longer in the log", ref=ref)
    links.reverse()
    return links


def walk(
    reader: ObjectReader,
    codec: Codec[R],
    tip: str | None,
    *,
    after: str | None = None,
    limit: int | None = None,
) -> list[LogEntry[R]]:
    """The records layer's one walker: every record of ``codec``'s log from ``tip``, oldest
    first, each decoded by the codec (the first bad one is its ``Corrupt``, naming the ref
    and the commit)."""
    return [
        LogEntry(link.commit, codec.parse(link.commit, link.data))
        for link in chain(reader, codec.ref, tip, codec.path, after=after, limit=limit)
    ]


class LostRace(enum.Enum):
    """What a writer does when another writer moved one of the refs it pushed first."""

    REBUILD = "rebuild"  # read the refs again, build on top, push again (an append)
    GIVE_BACK = "give_back"  # hand the push's answer back to the caller, which decides


OnLost = Callable[[PushResult], LostRace]


def rebuild(_result: PushResult) -> LostRace:
    """The default: an append never replaces another writer's record, it goes on top."""
    return LostRace.REBUILD


def refuse_on_loss(error: Callable[[PushResult], AssayError]) -> OnLost:
    """A policy hook for a writer whose lost race is an answer, not a retry: a claim
    (``Busy`` to an acquirer, ``Fenced`` to a holder). ``error`` says what the loser hears."""

    def refuse(result: PushResult) -> LostRace:
        raise error(result)

    return refuse


@dataclass(frozen=True)
class WritePolicy:
    """The lost-race policy of one write, the records layer's only one.

    ``attempts`` pushes at most; after a lost race ``on_lost`` says whether to build again
    on the fresh tips (``REBUILD``), give the answer back (``GIVE_BACK``), or raises (a
    refusing writer). A push refused for any other reason is ``GitError``, unless
    ``refused_is_lost``: a merge treats any refusal of its push as a race and judges again
    from fresh refs, as it always has. Past the last attempt the writer raises
    ``exhausted(result)``, else ``Busy`` naming the refs and ``what``."""

    attempts: int = 20
    what: str = "append"
    on_lost: OnLost = rebuild
    refused_is_lost: bool = False
    exhausted: Callable[[PushResult], AssayError] | None = None


class Stage:
    """Ref updates gathered for ONE atomic push, each a compare-and-swap on the tip its
    writer read: record commits (encoded by their log's codec), and any other move a
    writer makes beside them (main's squash commit, a run ref, a deletion, a pin)."""

    def __init__(self, forge: RecordBackend, *, atomic: bool = True) -> None:
        self.forge = forge
        # atomic=False: each ref lands or loses on its own (writes of unrelated refs that
        # must not wait on each other); the push's answer says which, ref by ref.
        self.atomic = atomic
        self._updates: dict[str, RefUpdate] = {}
        self._pins: set[str] = set()
        self.send: Callable[[Callable[[], PushResult]], PushResult] | None = None

    def record(
        self, codec: Codec[R], record: R, *, on: str | None, author: Identity, message: str
    ) -> LogEntry[R]:
        """Commit ``record`` on tip ``on`` (None: the log's first) and stage it; ``BadInput``
        and nothing staged when ``codec`` refuses it. A second record on a ref already staged
        chains on the first and keeps its compare-and-swap."""
        full, payload = codec.encode(record)
        before = self._updates.get(codec.ref)
        parent = before.new if before is not None else on
        commit = self.forge.commit(
            {codec.path: payload},
            parents=[parent] if parent else [],
            message=message,
            author=author,
        )
        expected = before.expected if before is not None else on
        self.add(RefUpdate(codec.ref, commit, expected=expected), replace=before is not None)
        return LogEntry(commit, full)

    def add(self, update: RefUpdate, *, replace: bool = False) -> None:
        """Stage any ref move; a ref staged twice is a bug unless ``replace``."""
        if update.ref in self._updates and not replace:
            raise ValueError(f"{update.ref} is staged twice in one push")
        self._updates[update.ref] = update

    def pin(self, ref: str, tip: str) -> None:
        """Hold ``ref`` at ``tip``, as read: the push loses as a whole if it moved since."""
        self.add(RefUpdate(ref, tip, expected=tip))
        self._pins.add(ref)

    def tip(self, ref: str) -> str | None:
        """The commit ``ref`` is staged to move to (None: not staged, or a deletion)."""
        update = self._updates.get(ref)
        return update.new if update is not None else None

    @property
    def updates(self) -> list[RefUpdate]:
        return list(self._updates.values())

    @property
    def moves(self) -> bool:
        """Whether the push would move anything (pins alone change nothing)."""
        return any(ref not in self._pins for ref in self._updates)

    def push(self) -> PushResult:
        """One push of every staged update, atomic unless the stage says otherwise (through
        ``send``, a forge's budget)."""

        def send() -> PushResult:
            return self.forge.push(self.updates, atomic=self.atomic)

        return self.send(send) if self.send is not None else send()


@dataclass(frozen=True)
class Written:
    """What ``write`` pushed: the last stage built, and the push's answer (None: the stage
    moved nothing, so nothing was pushed)."""

    stage: Stage
    result: PushResult | None

    @property
    def ok(self) -> bool:
        return self.result is None or self.result.ok


def write(forge: RecordBackend, build: Callable[[bool], Stage], *, policy: WritePolicy) -> Written:
    """The records layer's one writer: push what ``build`` staged, atomically, with a
    compare-and-swap on every ref, and apply ``policy`` when another writer moved one first.

    ``build(again)`` stages the updates on the tips the writer believes (``again``: a race
    was just lost, so read them afresh). A stage that moves nothing is not pushed."""
    result: PushResult | None = None
    stage = Stage(forge)
    for attempt in range(policy.attempts):
        stage = build(attempt > 0)
        if not stage.moves:
            return Written(stage, None)
        result = stage.push()
        if result.ok:
            return Written(stage, result)
        if not result.lost and not policy.refused_is_lost:
            raise GitError(f"{_subject(stage)}: {policy.what} refused: {result.detail}")
        if policy.on_lost(result) is LostRace.GIVE_BACK:
            return Written(stage, result)
    assert result is not None, "a write policy makes at least one attempt"
    if policy.exhausted is not None:
        raise policy.exhausted(result)
    raise Busy(f"{_subject(stage)}: lost {policy.attempts} {policy.what} races in a row; try again")


def _subject(stage: Stage) -> str:
    names = [update.ref for update in stage.updates]
    return names[0] if len(names) == 1 else f"{names[0]} (and {len(names) - 1} more refs)"


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
        log = cls(forge, codec.ref, kind=codec.kind)
        log.codec, log.path = codec, codec.path
        return log

    @classmethod
    def for_brief(
        cls,
        forge: RecordBackend,
        log: Literal["events", "evidence", "status"],
        brief: str,
        **options: Any,
    ) -> RefLog:
        """The ``refs/assay/<log>/<brief>`` log (``kind`` defaults to ``log``)."""
        if log not in BRIEF_LOGS:
            raise BadInput(f"unknown brief log {log!r} (one of {', '.join(BRIEF_LOGS)})")
        check_id(brief)
        options.setdefault("kind", log)
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
        with self.forge.batch() as reader:
            links = chain(reader, self.ref, self.head(fetch=fetch), self.path, after=after)
        return [(link.commit, link.data) for link in links]

    def entries(
        self, *, fetch: bool = True, after: str | None = None
    ) -> list[LogEntry[dict[str, Any]]]:
        """Every record, oldest first (only those after commit ``after`` when given)."""
        with self.forge.batch() as reader:
            return walk(reader, self.codec, self.head(fetch=fetch), after=after)

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
    ) -> LogEntry[dict[str, Any]]:
        """Append one record (``v`` and ``kind`` are filled in); return it with its commit."""
        self.codec.encode(record)  # refused before anything is read or written
        summary = message or f"{self.kind} {self.ref.rsplit('/', 1)[-1]}"
        staged: list[LogEntry[dict[str, Any]]] = []

        def build(again: bool) -> Stage:
            stage = Stage(self.forge)
            staged[:] = [
                stage.record(
                    self.codec, record, on=self.head(fetch=again), author=author, message=summary
                )
            ]
            return stage

        write(self.forge, build, policy=WritePolicy(attempts=max_attempts))
        (entry,) = staged
        self._tip, self._known = entry.commit, True
        return LogEntry(entry.commit, entry.record)
