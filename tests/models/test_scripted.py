"""The scripted model: answers chosen by conversation position, so replays agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.errors import BadInput
from assay.models import ModelReply, build_model
from assay.models.scripted import ScriptedModel, assistant_turns

SCRIPT = """\
responses:
  - content: first
    tool_calls:
      - {name: write_file, arguments: {path: a.txt, content: hi}}
      - {name: list_files}
  - content: second
    usage: {in_tokens: 7, out_tokens: 3}
  - content: third
"""


def scripted(tmp_path: Path, text: str = SCRIPT, **extra: Any) -> ScriptedModel:
    (tmp_path / "s.yaml").write_text(text)
    model = build_model({"adapter": "scripted", "script": "s.yaml", **extra}, base_dir=tmp_path)
    assert isinstance(model, ScriptedModel)
    return model


def test_answers_follow_the_number_of_assistant_turns(tmp_path: Path) -> None:
    model = scripted(tmp_path)
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first = model.complete(conversation)
    assert first.message["content"] == "first"
    assert [c["id"] for c in first.tool_calls] == ["call_0_0", "call_0_1"]
    assert json.loads(first.tool_calls[0]["function"]["arguments"]) == {
        "path": "a.txt",
        "content": "hi",
    }
    assert first.stop == "tool_calls"
    conversation += [first.message, {"role": "tool", "tool_call_id": "call_0_0", "content": "ok"}]
    second = model.complete(conversation)
    assert second.message == {"role": "assistant", "content": "second"}
    assert (second.usage.in_tokens, second.usage.out_tokens) == (7, 3)
    assert second.stop == "stop"


def test_asking_again_gives_the_same_answer(tmp_path: Path) -> None:
    """No cursor: a resumed run that repeats a call is not moved along the script."""
    model = scripted(tmp_path)
    conversation = [{"role": "user", "content": "go"}]
    assert model.complete(conversation) == model.complete(conversation)
    # A fresh adapter (a new process after a crash) agrees with the old one.
    again = scripted(tmp_path)
    assert again.complete(conversation).to_json() == model.complete(conversation).to_json()


def test_compaction_summary_carries_earlier_turns(tmp_path: Path) -> None:
    model = scripted(tmp_path)
    compacted = [{"role": "user", "content": "summary of two turns", "assay_turns": 2}]
    assert assistant_turns(compacted) == 2
    assert model.complete(compacted).message["content"] == "third"


def test_past_the_end_is_bad_input(tmp_path: Path) -> None:
    model = scripted(tmp_path)
    conversation = [{"role": "assistant", "content": "x"}] * 3
    with pytest.raises(BadInput, match="has 3 responses and the conversation asks for response 4"):
        model.complete(conversation)


def test_reply_round_trips_through_json(tmp_path: Path) -> None:
    reply = scripted(tmp_path).complete([{"role": "user", "content": "go"}])
    assert ModelReply.from_json(json.loads(json.dumps(reply.to_json()))) == reply


def test_price_gives_a_cost(tmp_path: Path) -> None:
    model = scripted(tmp_path, price={"in_per_1k": 1.0, "out_per_1k": 2.0})
    reply = model.complete([{"role": "user", "content": "go"}, {"role": "assistant"}])
    assert reply.usage.usd == pytest.approx(7 / 1000 + 3 * 2 / 1000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "responses:\n  - content: a\n    tool_calls:\n      - {arguments: {}}\n",
            "s.yaml line 4: responses[0].tool_calls[0].name: field required",
        ),
        ("responses:\n  - contents: a\n", "s.yaml line 2: responses[0].contents: unknown field"),
        ("responses: [\n", "invalid YAML"),
        ("- a\n", "a model script is a mapping"),
    ],
)
def test_script_errors_name_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(BadInput) as caught:
        scripted(tmp_path, text)
    assert expected in caught.value.message


def test_missing_script_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        build_model({"adapter": "scripted", "script": "nope.yaml"}, base_dir=tmp_path)
