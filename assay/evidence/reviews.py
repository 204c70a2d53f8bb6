"""The gate's view of a review record: ``refs/assay/reviews/<brief>`` on the embedded forge.

The desk opens and updates reviews (docs/internals.md, "Reviews"); the gate only reads
them, regenerates the evidence table in the body, and marks a review ``merged`` in the
same atomic push that moves main. The format is small and kept in step with the desk's
writer: a commit whose tree holds ``review.json``::

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

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), indent=2, sort_keys=True).encode() + b"\n"


MAX_REVIEW_BYTES = 4 * 1024 * 1024


def parse_review(data: bytes, *, where: str, commit: str = "") -> ReviewRecord:
    """A validated review record; ``BadInput`` naming ``where`` and the field otherwise."""
    raw = load_json(data, where=where, what="review record", limit=MAX_REVIEW_BYTES, error=BadInput)
    if not isinstance(raw, Mapping):
        raise BadInput(f"{where}: a review record must be a JSON object")
    if raw.get("v") != REVIEW_VERSION:
        raise BadInput(f"{where}: field 'v' must be {REVIEW_VERSION}")
    fields = ("brief", "branch", "head_sha", "title", "body", "state", "updated_at")
    for name in fields:
        if not isinstance(raw.get(name), str):
            raise BadInput(f"{where}: field {name!r} must be a string")
    if raw["state"] not in REVIEW_STATES:
        raise BadInput(f"{where}: field 'state' is {raw['state']!r}, not one of {REVIEW_STATES}")
    return ReviewRecord(**{name: raw[name] for name in fields}, commit=commit)


def read_review_at(forge: Forge, brief: str, commit: str | None) -> ReviewRecord | None:
    """The review record in ``commit`` (the fetched tip of the reviews ref), or None."""
    if commit is None:
        return None
    where = f"{reviews_ref(brief)}:{REVIEW_FILE}"
    data = forge.read_blob(commit, REVIEW_FILE)
    if data is None:
        raise BadInput(f"{where}: the review commit {commit[:12]} holds no {REVIEW_FILE}")
    return parse_review(data, where=where, commit=commit)


def now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def next_version(
    forge: Forge,
    review: ReviewRecord,
    *,
    message: str,
    body: str | None = None,
    state: str | None = None,
    head_sha: str | None = None,
) -> tuple[ReviewRecord, str]:
    """A child commit of ``review`` with the given fields changed (not pushed); returns both."""
    updated = replace(
        review,
        body=review.body if body is None else body,
        state=review.state if state is None else state,
        head_sha=review.head_sha if head_sha is None else head_sha,
        updated_at=now_stamp(),
    )
    commit = forge.commit(
        {REVIEW_FILE: updated.encode()},
        parents=[review.commit] if review.commit else [],
        message=message,
        author=GATE_IDENTITY,
    )
    return replace(updated, commit=commit), commit
