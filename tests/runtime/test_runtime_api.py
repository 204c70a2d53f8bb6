"""The runtime in-process: hooks, tools, fences, incomplete effects, retries, recorded values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.errors import Denied, Diverged, Fenced
from assay.journal import read_journal
from assay.models.base import Message, ModelReply, ToolSpec
from assay.runtime import Event, Run, StepError, execute
from tests.runtime.desks.small import EchoModel


class Tools:
    """A real (tiny) tool runner writing files in a directory."""

    allowed = frozenset({"write_file"})

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls = 0

    def call(self, name: str, args: dict[str, Any]) -> Any:
        self.calls += 1
        (self.root / args["path"]).write_text(args["text"])
        return {"written": args["path"]}

    def specs(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": "write_file"}}]


class Hooks:
    """Records what the runtime asked of its host."""

    def __init__(self, *, fenced: bool = False, events: list[Event] | None = None) -> None:
        self.calls: list[str] = []
        self.fenced = fenced
        self._events = events or []

    def durability_point(self, reason: str) -> None:
        self.calls.append(f"durable:{reason}")

    def heartbeat(self, progress: dict[str, Any]) -> None:
        self.calls.append(f"heartbeat:{progress.get('done')}")

    def ensure_owner(self) -> None:
        self.calls.append("ensure_owner")
        if self.fenced:
            raise Fenced("claim lost to fence 9")

    def events(self) -> list[Event]:
        return list(self._events)


def test_the_divergence_message_names_position_recorded_and_requested(tmp_path: Path) -> None:
    tools = Tools(tmp_path)

    def v1(run: Run, _: Any) -> Any:
        run.step("plan", lambda: "p")
        run.tool("write_file", {"path": "a.txt", "text": "hi"})
        run.wait_for("approval")

    def v2(run: Run, _: Any) -> Any:
        run.step("plan", lambda: "p")
        run.model([{"role": "user", "content": "hi"}])

    assert execute(v1, None, journal_dir=tmp_path / "j", tools=tools).code == 75
    with pytest.raises(Diverged) as info:
        execute(v2, None, journal_dir=tmp_path / "j", tools=tools, model=EchoModel())
    assert info.value.message == "step 2 was recorded as tool:write_file, the code asked for model"
    assert info.value.code == 5


def test_tools_run_once_and_undeclared_tools_are_denied_and_recorded(tmp_path: Path) -> None:
    tools = Tools(tmp_path)

    def desk(run: Run, _: Any) -> Any:
        out = run.tool("write_file", {"path": "a.txt", "text": "hi"})
        run.wait_for("approval")
        run.tool("delete_everything", {})
        return out

    assert execute(desk, None, journal_dir=tmp_path / "j", tools=tools).code == 75
    hooks = Hooks(events=[Event(id="e1", kind="approve")])
    with pytest.raises(Denied, match="'delete_everything' is not declared"):
        execute(desk, None, journal_dir=tmp_path / "j", tools=tools, hooks=hooks)
    assert tools.calls == 1
    kinds = [e["kind"] for e in read_journal(tmp_path / "j").entries]
    assert kinds[-1] == "denied"


def test_hooks_are_called_at_durability_points_and_before_effects(tmp_path: Path) -> None:
    hooks = Hooks()

    def desk(run: Run, _: Any) -> Any:
        run.step("think", lambda: 1)
        run.model([{"role": "user", "content": "x"}])
        run.heartbeat({"done": 2})
        run.effect("deploy", lambda key: key)
        return "ok"

    result = execute(desk, None, journal_dir=tmp_path / "j", hooks=hooks, model=EchoModel())
    assert result.code == 0
    assert hooks.calls == [
        "durable:model",
        "heartbeat:2",
        "ensure_owner",
        "durable:effect",
        "durable:end",
    ]


def test_a_fenced_holder_writes_no_effect(tmp_path: Path) -> None:
    ran: list[str] = []

    def desk(run: Run, _: Any) -> Any:
        run.effect("deploy", lambda key: ran.append(key))

    with pytest.raises(Fenced):
        execute(desk, None, journal_dir=tmp_path / "j", hooks=Hooks(fenced=True))
    assert ran == []
    assert not [e for e in read_journal(tmp_path / "j").entries if e.get("step") == "effect"]


def test_a_higher_fence_appends_a_takeover_and_a_lower_one_is_fenced(tmp_path: Path) -> None:
    def desk(run: Run, _: Any) -> Any:
        run.step("a", lambda: 1)
        run.wait_for("approval")

    assert execute(desk, None, journal_dir=tmp_path / "j", fence=1).code == 75
    assert execute(desk, None, journal_dir=tmp_path / "j", fence=2).code == 75
    entries = read_journal(tmp_path / "j").entries
    takeovers = [(e["prev_fence"], e["fence"]) for e in entries if e["kind"] == "takeover"]
    assert takeovers == [(0, 1), (1, 2)]
    assert entries[-1]["fence"] == 2
    with pytest.raises(Fenced):
        Run.open(tmp_path / "j", fence=1)


class Crash(BaseException):
    """Stands in for the process dying inside a step body."""


def test_an_incomplete_effect_reruns_with_its_key_after_asking_check(tmp_path: Path) -> None:
    made: list[str] = []
    asked: list[str] = []

    def crashing(run: Run, _: Any) -> Any:
        def act(key: str) -> str:
            made.append(key)
            raise Crash()

        return run.effect("deploy", act, key="deploy-42")

    with pytest.raises(Crash):
        execute(crashing, None, journal_dir=tmp_path / "j")

    def resumed(run: Run, _: Any) -> Any:
        def check(key: str) -> Any:
            asked.append(key)
            return {"already": key}

        return run.effect("deploy", lambda key: made.append(key), check=check)

    result = execute(resumed, None, journal_dir=tmp_path / "j")
    assert result.output == {"already": "deploy-42"}
    assert made == ["deploy-42"] and asked == ["deploy-42"]


def test_step_errors_are_recorded_and_re_raised_on_replay(tmp_path: Path) -> None:
    attempts: list[int] = []

    def flaky() -> int:
        attempts.append(1)
        if len(attempts) < 3:
            raise ValueError("not yet")
        return 7

    def always() -> int:
        attempts.append(1)
        raise ValueError("never")

    def desk(run: Run, _: Any) -> Any:
        value = run.step("flaky", flaky, retry=2)
        try:
            run.step("always", always)
        except StepError as error:
            caught = (error.error_type, error.message)
        run.wait_for("approval")
        return [value, *caught]

    assert execute(desk, None, journal_dir=tmp_path / "j").code == 75
    assert len(attempts) == 4
    result = execute(
        desk, None, journal_dir=tmp_path / "j", hooks=Hooks(events=[Event("e", "approve")])
    )
    assert result.output == [7, "ValueError", "ValueError: never"]
    assert len(attempts) == 4


def test_now_random_and_uuid_replay_the_recorded_values(tmp_path: Path) -> None:
    seen: list[Any] = []

    def desk(run: Run, _: Any) -> Any:
        values = [run.now().isoformat(), run.random(), run.uuid()]
        seen.append(values)
        run.wait_for("approval")
        return values

    execute(desk, None, journal_dir=tmp_path / "j")
    result = execute(
        desk, None, journal_dir=tmp_path / "j", hooks=Hooks(events=[Event("e", "approve")])
    )
    assert seen[0] == seen[1] == result.output


class Scripted:
    name = "scripted"
    context_window = 1000

    def __init__(self) -> None:
        self.calls = 0

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        self.calls += 1
        return ModelReply({"role": "assistant", "content": f"reply {self.calls}"})


def test_model_replies_are_replayed_without_calling_the_model(tmp_path: Path) -> None:
    model = Scripted()

    def desk(run: Run, _: Any) -> Any:
        messages: list[Message] = [{"role": "user", "content": "hi"}]
        for _ in range(3):
            messages.append(run.model(messages).message)
            messages.append({"role": "user", "content": "more"})
        run.wait_for("approval")
        return [m["content"] for m in messages]

    first = execute(desk, None, journal_dir=tmp_path / "j", model=model)
    assert first.code == 75 and model.calls == 3
    result = execute(
        desk,
        None,
        journal_dir=tmp_path / "j",
        model=model,
        hooks=Hooks(events=[Event("e", "approve")]),
    )
    assert model.calls == 3
    assert result.output == ["hi", "reply 1", "more", "reply 2", "more", "reply 3", "more"]
