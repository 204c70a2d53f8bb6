"""Review records: ``refs/assay/reviews/<brief>``, the embedded forge's pull request.

This module owns the record (``ReviewRecord``), its one codec (``ReviewCodec``: the bytes
the desk and the gate both write, and the decoder every reader uses) and the staging of a
new version into a push (``stage_version``). The desk opens and updates reviews
(``assay.desks.records.review``); the gate regenerates the evidence table in the body and
marks a review ``merged`` in the same atomic push that moves main. A commit whose tree
holds ``review.json``::

    {"v": 1, "brief", "branch", "head_sha", "title", "body",
     "state": "draft" | "ready" | "merged" | "closed", "updated_at"}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import assay.refs as refs
from assay.errors import BadInput
from assay.evidence.records import load_json
from assay.forge import Forge
from assay.forge.records import Stage
from assay.plumbing import Identity

REVIEW_VERSION = 1
REVIEW_FILE = "review.json"
REVIEW_STATES = ("draft", "ready", "merged", "closed")
GATE_IDENTITY = Identity(name="assay-gate", email="gate@assay.invalid")


def reviews_ref(brief: str) -> str:
    """The ref of ``brief``'s review record."""
    return refs.review_ref(brief)


@dataclass(frozen=True)
class ReviewRecord:
    """One version of a review record, and the commit it was read from."""

    brief: str
    branch: str
    head_sha: str
    title: str
    body: str
    state: str
    updated_at: str
    v: int = REVIEW_VERSION
    commit: str = ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("commit")
        return data


MAX_REVIEW_BYTES = 4 * 1024 * 1024
_FIELDS = ("brief", "branch", "head_sha", "title", "body", "state", "updated_at")


def parse_review(data: bytes, *, where: str, commit: str = "") -> ReviewRecord:
    """A validated review record; ``BadInput`` naming ``where`` and the field otherwise."""
    raw = load_json(data, where=where, what="review record", limit=MAX_REVIEW_BYTES, error=BadInput)
    if not isinstance(raw, Mapping):
        raise BadInput(f"{where}: a review record must be a JSON object")
    if raw.get("v") != REVIEW_VERSION:
        raise BadInput(f"{where}: field 'v' must be {REVIEW_VERSION}")
    for name in _FIELDS:
        if not isinstance(raw.get(name), str):
            raise BadInput(f"{where}: field {name!r} must be a string")
    if raw["state"] not in REVIEW_STATES:
        raise BadInput(f"{where}: field 'state' is {raw['state']!r}, not one of {REVIEW_STATES}")
    return ReviewRecord(**{name: raw[name] for name in _FIELDS}, commit=commit)


@dataclass(frozen=True)
class ReviewCodec:
    """The review log's codec (``assay.forge.records.Codec``): ``review.json`` on
    ``refs/assay/reviews/<brief>``, the one encoding the desk and the gate both write and
    the one decoder (``parse_review``) every reader uses."""

    brief: str
    path: str = REVIEW_FILE

    @property
    def ref(self) -> str:
        return reviews_ref(self.brief)

    def encode(self, record: ReviewRecord) -> tuple[ReviewRecord, bytes]:
        """``record`` and its bytes; ``BadInput`` naming the ref and field when a reader
        would refuse it, or it names another brief (nothing is written)."""
        payload = json.dumps(record.to_json(), indent=2, sort_keys=True).encode() + b"\n"
        return self._checked(parse_review(payload, where=self.ref), where=self.ref), payload

    def parse(self, commit: str, blob: bytes | None) -> ReviewRecord:
        where = f"{self.ref}:{REVIEW_FILE}"
        if blob is None:
            raise BadInput(f"{where}: the review commit {commit[:12]} holds no {REVIEW_FILE}")
        return self._checked(parse_review(blob, where=where, commit=commit), where=where)

    def _checked(self, review: ReviewRecord, *, where: str) -> ReviewRecord:
        """A review on this brief's ref must be this brief's (a copy of another brief's
        ready review is not a review of this one)."""
        if review.brief != self.brief:
            raise BadInput(f"{where}: field 'brief' is {review.brief!r}, not {self.brief!r}")
        return review


def read_review_at(forge: Forge, brief: str, commit: str | None) -> ReviewRecord | None:
    """The review record in ``commit`` (the fetched tip of the reviews ref), or None."""
    if commit is None:
        return None
    return ReviewCodec(brief).parse(commit, forge.read_blob(commit, REVIEW_FILE))


def now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stage_version(
    stage: Stage,
    review: ReviewRecord,
    *,
    message: str,
    body: str | None = None,
    state: str | None = None,
    head_sha: str | None = None,
    author: Identity = GATE_IDENTITY,
) -> ReviewRecord:
    """The next version of ``review`` with the given fields changed, staged as its child
    (the push's compare-and-swap on ``review.commit``); returned with its commit."""
    updated = replace(
        review,
        body=review.body if body is None else body,
        state=review.state if state is None else state,
        head_sha=review.head_sha if head_sha is None else head_sha,
        updated_at=now_stamp(),
    )
    return stage_review(stage, updated, on=review.commit or None, message=message, author=author)


def stage_review(
    stage: Stage, review: ReviewRecord, *, on: str | None, message: str, author: Identity
) -> ReviewRecord:
    """``review`` staged on the review ref's tip ``on``, encoded by the review codec."""
    staged = stage.record(ReviewCodec(review.brief), review, on=on, author=author, message=message)
    return replace(staged.record, commit=staged.commit)
