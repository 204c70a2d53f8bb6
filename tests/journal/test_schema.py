"""Real journal entries, of every kind, validate against docs/journal-entry.schema.json."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from assay.errors import Denied
from assay.journal import KINDS, read_journal
from assay.runtime import Budget, Event, Run, execute
from tests.conftest import REPO_ROOT
from tests.runtime.desks.small import EchoModel

SCHEMA = json.loads((REPO_ROOT / "docs" / "journal-entry.schema.json").read_text())


class Events:
    def __init__(self, *events: Event) -> None:
        self.delivered = list(events)

    def durability_point(self, reason: str) -> None: ...
    def heartbeat(self, progress: dict[str, Any]) -> None: ...
    def ensure_owner(self) -> None: ...
    def events(self) -> list[Event]:
        return self.delivered


class NoTools:
    allowed = frozenset({"echo"})

    def call(self, name: str, args: dict[str, Any]) -> Any:
        return args

    def specs(self) -> list[dict[str, Any]]:
        return []


def _everything(run: Run, _: Any) -> Any:
    run.step("plan", lambda: {"big": "x" * 5000})
    run.model([{"role": "user", "content": "hi"}])
    run.tool("echo", {"a": 1})
    run.checkpoint({"at": 4})
    run.signals()
    run.now()
    run.wait_for("approval", timeout=3600)
    run.effect("deploy", lambda key: key, compensate=lambda: None)
    with contextlib.suppress(Denied):
        run.tool("rm", {})
    run.step("boom", lambda: 1 / 0)


def _all_entries(tmp_path: Path) -> list[dict[str, Any]]:
    a = tmp_path / "a"
    common: dict[str, Any] = {"model": EchoModel(), "tools": NoTools(), "segment_bytes": 1500}
    assert execute(_everything, {"n": 1}, journal_dir=a, fence=1, **common).code == 75
    hooks = Events(Event("s1", "signal", "go"), Event("e1", "approve", data={"name": "approval"}))
    assert execute(_everything, {"n": 1}, journal_dir=a, fence=2, hooks=hooks, **common).code == 1

    b = tmp_path / "b"

    def v1(run: Run, _: Any) -> Any:
        run.step("one", lambda: 1)
        run.sleep(3600)

    def v2(run: Run, _: Any) -> Any:
        run.step("two", lambda: 2)
        run.model([{"role": "user", "content": "x"}])
        return "ok"

    execute(v1, None, journal_dir=b)
    paused = execute(
        v2,
        None,
        journal_dir=b,
        on_divergence="fork",
        model=EchoModel(),
        budget=Budget(model_calls=0),
    )
    assert paused.code == 7
    assert execute(v2, None, journal_dir=b, model=EchoModel()).code == 0
    return read_journal(a).entries + read_journal(b).entries


def test_the_schema_is_a_valid_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_entries_of_every_kind_validate(tmp_path: Path) -> None:
    entries = _all_entries(tmp_path)
    assert {e["kind"] for e in entries} == KINDS
    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    for entry in entries:
        errors = list(validator.iter_errors(entry))
        assert not errors, (entry, errors[0].message)


def test_the_schema_rejects_a_damaged_entry(tmp_path: Path) -> None:
    entry = dict(_all_entries(tmp_path)[0])
    validator = jsonschema.Draft202012Validator(SCHEMA)
    validator.validate(entry)
    for field, value in (("v", 2), ("kind", "nope"), ("prev", "md5:x"), ("seq", 0)):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({**entry, field: value})
