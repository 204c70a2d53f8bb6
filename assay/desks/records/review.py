"""Review records on the embedded forge: ``refs/assay/reviews/<brief>``.

The embedded forge's stand-in for a pull request. The ref points at a commit whose tree
holds ``review.json``::

    {"v": 1, "brief", "branch", "head_sha", "title", "body",
     "state": "draft" | "ready" | "merged" | "closed", "updated_at"}

Each update is a child commit of the previous one (the history is the review's timeline),
pushed as a compare-and-swap against the sha just read, so two writers cannot silently
overwrite each other. The body is a summary of the run's journal and the table of the
evidence rows the desk claimed (the gate's verified rows live on the evidence ref).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import assay.refs as refs
from assay.errors import BadInput
from assay.evidence.reviews import (
    REVIEW_FILE,
    REVIEW_STATES,
    REVIEW_VERSION,
    ReviewRecord,
    now_stamp,
    read_review_at,
    reviews_ref,
    stage_review,
)
from assay.forge import Forge
from assay.forge.records import Stage, WritePolicy, write
from assay.plumbing import Identity

DESK_IDENTITY = Identity(name="assay desk", email="desk@assay.invalid")
# One review record type, written by the desk and read (and marked merged) by the gate.
Review = ReviewRecord
FORMAT_VERSION = REVIEW_VERSION
STATES = REVIEW_STATES

__all__ = [
    "REVIEW_FILE",
    "Review",
    "evidence_table",
    "new_review",
    "read_review",
    "render_body",
    "review_at",
    "reviews_ref",
    "stage_update",
    "write_review",
]


def read_review(forge: Forge, brief: str) -> Review | None:
    """The current review record of ``brief``, or None when none was opened."""
    ref = reviews_ref(brief)
    return read_review_at(forge, brief, forge.refresh([ref]).get(ref))


def evidence_table(rows: list[Mapping[str, Any]]) -> str:
    """The Markdown table of claimed evidence rows (what the desk believes, not verified)."""
    if not rows:
        return "_The desk claimed no evidence rows._"
    lines = ["| row | claimed | note |", "| --- | --- | --- |"]
    for row in rows:
        note = str(row.get("note", "")).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {row.get('row', '?')} | {row.get('result', '?')} | {note} |")
    return "\n".join(lines)


def render_body(
    *,
    outcome: str,
    summary_text: str,
    journal: Mapping[str, Any],
    claimed: list[Mapping[str, Any]],
) -> str:
    """The review body: the desk's summary, the journal's figures, the claimed evidence."""
    figures = (
        f"- outcome: **{outcome}**\n"
        f"- steps: {journal.get('steps', 0)}, model calls: {journal.get('model_calls', 0)}, "
        f"tokens: {journal.get('tokens', 0)}, usd: {journal.get('usd', 0)}\n"
        f"- last step: {journal.get('last_step', '')} at {journal.get('last_time', '')}\n"
        f"- journal head: `{journal.get('head', '')}`"
    )
    return (
        f"## Summary\n\n{summary_text.strip() or '_no summary_'}\n\n"
        f"## Journal\n\n{figures}\n\n"
        f"## Claimed evidence\n\n{evidence_table(claimed)}\n\n"
        "Claimed rows are the desk's own belief; only the gate's verified rows count.\n"
    )


def new_review(brief: str, *, head_sha: str, title: str, body: str, state: str) -> Review:
    if state not in STATES:
        raise BadInput(f"review state {state!r} is not one of {STATES}")
    return Review(
        brief=brief,
        branch=refs.branch_name(brief),
        head_sha=head_sha,
        title=title,
        body=body,
        state=state,
        updated_at=now_stamp(),
    )


def write_review(
    forge: Forge,
    brief: str,
    *,
    head_sha: str,
    title: str,
    body: str,
    state: str,
    attempts: int = 5,
) -> Review:
    """Open or update the review record (CAS; on a lost race, read again and go on top)."""
    review = new_review(brief, head_sha=head_sha, title=title, body=body, state=state)
    ref = reviews_ref(brief)
    written: list[Review] = []

    def build(_again: bool) -> Stage:
        stage = Stage(forge)
        written[:] = [stage_update(stage, review, parent=forge.refresh([ref]).get(ref))]
        return stage

    write(forge, build, policy=WritePolicy(attempts=attempts, what="review"))
    return written[0]


def stage_update(stage: Stage, review: Review, *, parent: str | None) -> Review:
    """``review`` staged as a child commit of ``parent`` (the tip the caller read), for the
    caller's atomic push (the desk's: with the claim's settlement)."""
    return stage_review(
        stage,
        review,
        on=parent,
        author=DESK_IDENTITY,
        message=f"review {review.brief}: {review.state} at {review.head_sha[:12]}",
    )


def review_at(forge: Forge, brief: str, sha: str | None) -> Review | None:
    """The review record in commit ``sha`` (already fetched), or None when ``sha`` is None."""
    return read_review_at(forge, brief, sha)
