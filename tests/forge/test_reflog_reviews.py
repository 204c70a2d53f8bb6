"""RefLog reads and writes review records in the desk layer's shape (``review.json``)."""

from __future__ import annotations

import pytest

from assay.desks.records.review import REVIEW_FILE, read_review, write_review
from assay.errors import Corrupt
from assay.forge import Forge, RefLog
from assay.forge.records import LOG_FILES, RECORD_PATH
from assay.plumbing import Identity, RefUpdate

GATE = Identity("gate", "gate@assay.invalid")


def test_the_reviews_log_uses_the_desk_layers_file() -> None:
    assert LOG_FILES["reviews"] == REVIEW_FILE
    assert {LOG_FILES[log] for log in ("events", "evidence", "status")} == {RECORD_PATH}


def test_a_review_the_desk_wrote_is_read_by_the_log(forge: Forge) -> None:
    first = write_review(
        forge, "calc", head_sha="a" * 40, title="Add calc", body="draft body", state="draft"
    )
    second = write_review(
        forge, "calc", head_sha="b" * 40, title="Add calc", body="ready body", state="ready"
    )
    log = RefLog.for_brief(forge, "reviews", "calc")
    assert log.path == REVIEW_FILE
    assert log.read() == [first.to_json(), second.to_json()]
    assert log.latest() == second.to_json()


def test_a_review_appended_to_the_log_is_read_by_the_desk_layer(forge: Forge) -> None:
    write_review(forge, "calc", head_sha="a" * 40, title="Add calc", body="b", state="ready")
    log = RefLog.for_brief(forge, "reviews", "calc")
    current = log.latest()
    assert current is not None
    entry = log.append({**current, "state": "merged"}, author=GATE)
    assert "kind" not in entry.record  # the review format has no kind field
    tip = forge.fetch("refs/assay/reviews/calc")["refs/assay/reviews/calc"]
    assert forge.read_blob(tip, REVIEW_FILE) is not None
    assert forge.read_blob(tip, RECORD_PATH) is None
    review = read_review(forge, "calc")
    assert review is not None and review.state == "merged" and review.head_sha == "a" * 40


def test_a_review_commit_without_review_json_is_corrupt(forge: Forge) -> None:
    commit = forge.commit(
        {RECORD_PATH: b'{"v": 1, "kind": "reviews"}'}, parents=[], message="x", author=GATE
    )
    assert forge.push([RefUpdate("refs/assay/reviews/calc", commit, expected=None)]).ok
    with pytest.raises(Corrupt, match=r"holds no review\.json"):
        RefLog.for_brief(forge, "reviews", "calc").read()
