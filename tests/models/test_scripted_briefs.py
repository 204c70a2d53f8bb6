"""A scripted model serving several briefs, and its log of answered calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.errors import BadInput
from assay.models.config import ScriptedConfig
from assay.models.scripted import ScriptedModel, brief_of

SCRIPT = """\
briefs:
  alpha:
    responses:
      - content: alpha one
      - content: alpha two
  beta:
    responses:
      - content: beta one
"""


def _model(tmp_path: Path, text: str = SCRIPT) -> ScriptedModel:
    (tmp_path / "script.yaml").write_text(text, encoding="utf-8")
    return ScriptedModel(
        ScriptedConfig(adapter="scripted", script="script.yaml"), base_dir=tmp_path
    )


def _conversation(brief: str, *replies: str) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a desk."},
        {"role": "user", "content": f"# Brief {brief}: do the thing\n\nbody"},
    ]
    for reply in replies:
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "ok"}]
    return messages


def test_each_brief_gets_its_own_answers_by_turn(tmp_path: Path) -> None:
    model = _model(tmp_path)
    assert model.complete(_conversation("alpha")).message["content"] == "alpha one"
    assert model.complete(_conversation("alpha", "x")).message["content"] == "alpha two"
    assert model.complete(_conversation("beta")).message["content"] == "beta one"


def test_a_brief_without_answers_is_bad_input_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="'gamma'"):
        _model(tmp_path).complete(_conversation("gamma"))


def test_a_script_with_both_shapes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="either a responses list or a briefs mapping"):
        _model(tmp_path, SCRIPT + "responses: [{content: x}]\n")


def test_brief_of_reads_the_first_user_message() -> None:
    assert brief_of(_conversation("alpha")) == "alpha"
    assert brief_of([{"role": "user", "content": "no heading"}]) is None


def test_answered_calls_are_logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("ASSAY_MODEL_CALL_LOG", str(log))
    model = _model(tmp_path)
    model.complete(_conversation("alpha"))
    model.complete(_conversation("beta"))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["brief"], line["turn"]) for line in lines] == [("alpha", 0), ("beta", 0)]
