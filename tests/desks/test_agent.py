"""The agent desk kind on the real runtime, tools and scripted model (no forge)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.desks.kinds.agent import AgentOptions
from assay.errors import Denied
from assay.journal.blobs import blob_path
from assay.runtime import Budget, Event, LocalEventStore
from tests.desks.agent_helpers import call, make_rig

FINISH = call(
    "finish",
    summary="wrote hello.txt",
    evidence=[{"row": "unit", "result": "pass", "note": "checked by hand"}],
)


def test_tool_loop_writes_files_and_records_claimed_evidence(tmp_path: Path) -> None:
    rig = make_rig(
        tmp_path,
        [
            {"tool_calls": [call("write_file", path="hello.txt", content="hello\n")]},
            {"tool_calls": [call("read_file", path="hello.txt")]},
            {"tool_calls": [FINISH]},
        ],
    )
    result = rig.execute()
    assert result.code == 0, result
    assert result.output["status"] == "done"
    assert result.output["evidence"] == [
        {"row": "unit", "result": "pass", "note": "checked by hand"}
    ]
    assert (rig.worktree / "hello.txt").read_text() == "hello\n"
    entries = rig.entries()
    steps = [(e["step"], e["name"]) for e in entries if e["kind"] == "step" and e["status"] == "ok"]
    assert steps == [
        ("model", "model"),
        ("tool", "write_file"),
        ("model", "model"),
        ("tool", "read_file"),
        ("model", "model"),
        ("tool", "finish"),
        ("compute", "evidence.claimed"),
    ]
    claimed = next(e for e in entries if e.get("name") == "evidence.claimed")
    out = claimed["out"].get("value", claimed["out"])
    if "blob" in claimed["out"]:
        out = json.loads(blob_path(rig.journal_dir, claimed["out"]["blob"]).read_bytes())
    assert out["rows"][0]["row"] == "unit"
    assert "python" in out["env_fingerprint"]
    # The tool's result reached the model in the next request.
    assert "hello" in json.dumps(rig.model.requests[2][-1])
    assert len(rig.model.requests) == 3


def test_replay_after_the_end_pays_for_no_model_call(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [{"tool_calls": [FINISH]}])
    assert rig.execute().code == 0
    again = rig.execute()
    assert again.code == 0 and again.output["status"] == "done"
    assert len(rig.model.requests) == 1


def test_undeclared_tool_is_denied_and_recorded(tmp_path: Path) -> None:
    rig = make_rig(
        tmp_path,
        [{"tool_calls": [call("run", command="rm -rf /")]}],
        tools=("read_file", "finish"),
    )
    with pytest.raises(Denied) as caught:
        rig.execute()
    assert caught.value.code == 77
    assert next(e for e in rig.entries() if e["kind"] == "denied")["name"] == "run"


def test_write_outside_the_work_tree_is_denied(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [{"tool_calls": [call("write_file", path="../outside", content="x")]}])
    with pytest.raises(Denied) as caught:
        rig.execute()
    assert caught.value.code == 77
    assert not (tmp_path / "outside").exists()


def test_a_tool_error_goes_back_to_the_model(tmp_path: Path) -> None:
    rig = make_rig(
        tmp_path,
        [
            {"tool_calls": [call("read_file", path="missing.txt")]},
            {"tool_calls": [FINISH]},
        ],
    )
    assert rig.execute().code == 0
    last = rig.model.requests[1][-1]
    assert last["role"] == "tool" and "missing.txt" in last["content"]


def test_steering_reaches_the_model_once_at_the_next_turn(tmp_path: Path) -> None:
    rig = make_rig(
        tmp_path,
        [
            {"tool_calls": [call("list_files", path=".")]},
            {"tool_calls": [call("list_files", path=".")]},
            {"tool_calls": [FINISH]},
        ],
    )
    LocalEventStore(rig.journal_dir).append(
        Event(id="s1", kind="signal", text="use British spelling", actor="ann")
    )
    assert rig.execute().code == 0
    final = rig.model.requests[-1]
    steering = [m for m in final if "use British spelling" in str(m.get("content"))]
    assert len(steering) == 1
    assert steering[0]["content"] == "Steering from ann: use British spelling"
    # It arrived before the first model call, and was drained once.
    assert any("British" in str(m.get("content")) for m in rig.model.requests[0])
    signals = [e for e in rig.entries() if e["kind"] == "signal" and e["events"]]
    assert len(signals) == 1


def test_approval_waits_durably_then_finishes(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [{"tool_calls": [FINISH]}], options=AgentOptions(approval=True))
    waiting = rig.execute()
    assert (waiting.code, waiting.waiting_for) == (75, "approval")
    LocalEventStore(rig.journal_dir).append(Event(id="a1", kind="approve", actor="ann"))
    done = rig.execute()
    assert done.code == 0 and done.output["status"] == "done"
    assert len(rig.model.requests) == 1  # resuming replayed the model step


def test_rejection_is_heard_by_the_model(tmp_path: Path) -> None:
    rig = make_rig(
        tmp_path,
        [
            {"tool_calls": [FINISH]},
            {"tool_calls": [call("write_file", path="hello.txt", content="hello\n")]},
            {"tool_calls": [FINISH]},
        ],
        options=AgentOptions(approval=True),
    )
    assert rig.execute().code == 75
    LocalEventStore(rig.journal_dir).append(
        Event(id="r1", kind="reject", text="write the file first", actor="ann")
    )
    assert rig.execute().code == 75  # the second finish waits for approval again
    LocalEventStore(rig.journal_dir).append(Event(id="a2", kind="approve", actor="ann"))
    done = rig.execute()
    assert done.code == 0
    told = [m for m in rig.model.requests[1] if m.get("role") == "tool"]
    assert "write the file first" in told[-1]["content"]


def test_cancel_ends_the_run_at_the_drain_point(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [{"tool_calls": [FINISH]}])
    LocalEventStore(rig.journal_dir).append(Event(id="c1", kind="cancel", actor="ann"))
    result = rig.execute()
    assert result.code == 0 and result.output["status"] == "cancelled"
    assert rig.model.requests == []


def test_budget_pauses_and_resumes_when_raised(tmp_path: Path) -> None:
    rig = make_rig(
        tmp_path,
        [
            {"tool_calls": [call("list_files", path=".")]},
            {"tool_calls": [call("list_files", path=".")]},
            {"tool_calls": [FINISH]},
        ],
    )
    paused = rig.execute(budget=Budget(model_calls=2))
    assert paused.code == 7
    assert len(rig.model.requests) == 2
    done = rig.execute(budget=Budget(model_calls=5))
    assert done.code == 0
    assert len(rig.model.requests) == 3


def test_compaction_is_a_recorded_step_and_keeps_turn_positions(tmp_path: Path) -> None:
    big = "x" * 3000
    responses = [
        {"tool_calls": [call("write_file", path=f"f{i}.txt", content=big)]} for i in range(6)
    ]
    responses.append({"tool_calls": [FINISH]})
    rig = make_rig(
        tmp_path,
        responses,
        context_window=3000,
        options=AgentOptions(compact_at=0.75, keep_recent=2),
    )
    result = rig.execute()
    assert result.code == 0, result
    assert result.output["compactions"] >= 1
    assert all((rig.worktree / f"f{i}.txt").exists() for i in range(6))
    compacts = [e for e in rig.entries() if e.get("name") == "compact"]
    assert len(compacts) == result.output["compactions"]
    # The working conversation shrank, the journal kept every request.
    summaries = [m for r in rig.model.requests for m in r if "assay_turns" in m]
    assert summaries
    model_steps = [e for e in rig.entries() if e["kind"] == "step" and e["step"] == "model"]
    assert len([e for e in model_steps if e["status"] == "ok"]) == len(rig.model.requests)


def test_a_malformed_finish_goes_back_to_the_model(tmp_path: Path) -> None:
    rig = make_rig(
        tmp_path,
        [
            {"tool_calls": [call("finish", summary="x", evidence=[{"row": "unit"}])]},
            {"tool_calls": [FINISH]},
        ],
    )
    result = rig.execute()
    assert result.code == 0 and result.output["status"] == "done"
    told = rig.model.requests[1][-1]
    assert told["role"] == "tool" and "finish was refused" in told["content"]
