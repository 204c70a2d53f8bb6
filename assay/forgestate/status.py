"""The status record's codec and decoder: a sweep writes one per brief it acts on
(``refs/assay/status/<brief>``, ``assay.sweep.apply``); every reader judges it here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import assay.refs as refs
from assay.errors import BadInput
from assay.forge.records import RecordCodec

MAX_STATUS_BYTES = 64 * 1024
_STATUS_TEXT = {"state": 64, "note": 4000, "by": 200, "at": 64, "sweep": 64, "brief": 200}


def status_codec(brief: str) -> RecordCodec:
    """The status record's codec: ``record.json`` on ``refs/assay/status/<brief>``, refused
    on encode and decode alike by ``status_problem``."""
    return RecordCodec(refs.status_ref(brief), "status", validate=_check_status)


def _check_status(record: dict[str, Any]) -> None:
    problem = status_problem(record)
    if problem:
        raise BadInput(f"status record refused: {problem}")


def status_problem(record: Mapping[str, Any]) -> str:
    """Why a stored status record is refused ("" when it is fine): the one status decoder.

    Readers (the board, the sweep's planning) quarantine a refused record for its brief
    instead of reading a megabyte note or a number where a word belongs.
    """
    try:
        size = len(json.dumps(record, default=str))
    except (TypeError, ValueError, RecursionError):
        return "not plain JSON"
    if size > MAX_STATUS_BYTES:
        return f"over {MAX_STATUS_BYTES} bytes"
    if record.get("v") != 1:
        return "field 'v' is not 1"
    for name, limit in _STATUS_TEXT.items():
        value = record.get(name, "")
        if not isinstance(value, str) or len(value) > limit:
            return f"field {name!r} must be text of at most {limit} characters"
    fence = record.get("fence", 0)
    if fence is not None and (
        isinstance(fence, bool) or not isinstance(fence, int) or not 0 <= fence <= 2**53
    ):
        return "field 'fence' must be a fence number"
    return ""
