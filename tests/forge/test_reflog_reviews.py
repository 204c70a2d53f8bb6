"""The review log's one codec: what the desk writes, the gate stages and every reader decodes."""

from __future__ import annotations

import pytest

from assay.desks.records.review import REVIEW_FILE, read_review, write_review
from assay.errors import BadInput
from assay.evidence.reviews import ReviewCodec, stage_version
from assay.forge import Forge
from assay.forge.records import RECORD_PATH, Stage, walk
from assay.plumbing import Identity, RefUpdate

GATE = Identity("gate", "gate@assay.invalid")
REF = "refs/assay/reviews/calc"


def test_a_review_the_desk_wrote_is_read_by_the_walker(forge: Forge) -> None:
    first = write_review(
        forge, "calc", head_sha="a" * 40, title="Add calc", body="draft body", state="draft"
    )
    second = write_review(
        forge, "calc", head_sha="b" * 40, title="Add calc", body="ready body", state="ready"
    )
    with forge.batch() as reader:
        entries = walk(reader, ReviewCodec("calc"), forge.refresh([REF])[REF])
    assert [entry.record.to_json() for entry in entries] == [first.to_json(), second.to_json()]
    assert [entry.record.commit for entry in entries] == [entry.commit for entry in entries]


def test_a_version_the_gate_stages_is_read_by_the_desk_layer(forge: Forge) -> None:
    write_review(forge, "calc", head_sha="a" * 40, title="Add calc", body="b", state="ready")
    current = read_review(forge, "calc")
    assert current is not None
    stage = Stage(forge)
    merged = stage_version(stage, current, message="merged", state="merged")
    assert [update.expected for update in stage.updates] == [current.commit]
    assert stage.push().ok
    tip = forge.fetch(REF)[REF]
    assert tip == merged.commit
    assert forge.read_blob(tip, REVIEW_FILE) is not None
    assert forge.read_blob(tip, RECORD_PATH) is None
    review = read_review(forge, "calc")
    assert review is not None and review.state == "merged" and review.head_sha == "a" * 40


def test_a_review_commit_without_review_json_is_refused(forge: Forge) -> None:
    commit = forge.commit(
        {RECORD_PATH: b'{"v": 1, "kind": "reviews"}'}, parents=[], message="x", author=GATE
    )
    assert forge.push([RefUpdate(REF, commit, expected=None)]).ok
    with forge.batch() as reader, pytest.raises(BadInput, match=r"holds no review\.json"):
        walk(reader, ReviewCodec("calc"), commit)


def test_a_review_naming_another_brief_is_never_staged(forge: Forge) -> None:
    write_review(forge, "calc", head_sha="a" * 40, title="Add calc", body="b", state="ready")
    current = read_review(forge, "calc")
    assert current is not None
    stage = Stage(forge)
    with pytest.raises(BadInput, match="field 'brief' is 'other'"):
        stage.record(
            ReviewCodec("calc"),
            current.__class__(**{**current.to_json(), "brief": "other"}),
            on=current.commit,
            author=GATE,
            message="x",
        )
    assert stage.updates == []
