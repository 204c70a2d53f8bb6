"""Typed step outputs (pydantic or JSON Schema), checked fresh and on replay; run.map."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from assay.journal import read_journal
from assay.runtime import Run, StepOutputError, execute
from tests.runtime.helpers import Approve


class Plan(BaseModel):
    title: str
    files: list[str]


class Work(BaseModel):
    paths: list[str]
    count: int


def test_pydantic_outputs_come_back_as_models_fresh_and_replayed(tmp_path: Path) -> None:
    got: list[Any] = []

    def desk(run: Run, _: Any) -> Any:
        plan = run.step("plan", lambda: {"title": "t", "files": ["a.py"]}, output=Plan)
        work = run.map(
            "to-work", plan, lambda p: {"paths": p.files, "count": len(p.files)}, output=Work
        )
        got.append((plan, work))
        run.wait_for("approval")
        return work

    execute(desk, None, journal_dir=tmp_path / "j")
    result = execute(desk, None, journal_dir=tmp_path / "j", hooks=Approve())
    assert got[0] == got[1] == (Plan(title="t", files=["a.py"]), Work(paths=["a.py"], count=1))
    assert isinstance(got[1][0], Plan)
    assert result.output == {"paths": ["a.py"], "count": 1}


def test_a_fresh_output_that_does_not_fit_names_the_step_and_field(tmp_path: Path) -> None:
    def desk(run: Run, _: Any) -> Any:
        return run.step("plan", lambda: {"title": "t", "files": "a.py"}, output=Plan)

    with pytest.raises(
        StepOutputError, match=r"step 1 \(compute:plan\): output field files: "
    ) as info:
        execute(desk, None, journal_dir=tmp_path / "j")
    assert info.value.code == 65
    # nothing recorded for the step: fixed code runs it again
    assert not [e for e in read_journal(tmp_path / "j").entries if e["kind"] == "step"]


def test_a_recorded_output_that_no_longer_fits_names_the_step_and_field(tmp_path: Path) -> None:
    def v1(run: Run, _: Any) -> Any:
        run.step("plan", lambda: {"title": "t"})
        run.wait_for("approval")

    def v2(run: Run, _: Any) -> Any:
        run.step("plan", lambda: {"title": "t", "files": []}, output=Plan)

    execute(v1, None, journal_dir=tmp_path / "j")
    with pytest.raises(
        StepOutputError,
        match=r"step 1 \(compute:plan\): recorded output field files: Field required",
    ):
        execute(v2, None, journal_dir=tmp_path / "j")


def test_json_schema_shapes(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "required": ["rows"],
        "properties": {"rows": {"type": "array", "items": {"type": "object", "required": ["row"]}}},
    }

    def desk(run: Run, _: Any) -> Any:
        good = run.step("ok", lambda: {"rows": [{"row": "unit"}]}, output=schema)
        run.step("bad", lambda: {"rows": [{"id": "unit"}]}, output=schema)
        return good

    with pytest.raises(
        StepOutputError, match=r"step 2 \(compute:bad\): output field rows.0: 'row' is a required"
    ):
        execute(desk, None, journal_dir=tmp_path / "j")
