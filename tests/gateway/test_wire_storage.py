"""How a CLI's conversation is stored: each message once, whatever markers (Claude Code's
``cache_control``) a request adds to it, each context node naming its parent node and the
new items only; and journals of the older shape (items stored as sent, flat blobs) still
replay byte for byte.

End to end in-process, as ``test_gateway``: real HTTP on loopback, a real Run and journal,
the scripted agent client marking each request's last message as Claude Code does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from assay.errors import Corrupt
from assay.journal import read_journal
from assay.journal.format import canonical
from assay.runtime import Run
from assay.runtime.marks import remark, unmark
from assay.runtime.wire import WIRE, WireSession
from tests.fakes.wire import WireFake
from tests.gateway.harness import KEY, KEY_ENV, drive

# Recorded by Assay before markers were set aside (items stored as sent, every node with
# no base and every message hash so far, blobs in the flat layout), with SCRIPT below.
GOLDEN = Path(__file__).resolve().parent / "golden" / "anthropic-marked-flat"


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


SCRIPT = [
    {"tool_calls": [call("Write", path="hello.txt", content="hello\n")]},
    {"tool_calls": [call("Bash", command="cat hello.txt")]},
    {"tool_calls": [call("Bash", command="echo again")]},
    {"content": "all done"},
]


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def intents(journal: Path) -> list[dict[str, Any]]:
    return [
        e
        for e in read_journal(journal).entries
        if e.get("name") == "wire" and e.get("status") == "started"
    ]


def rebuilt_requests(journal: Path) -> list[dict[str, Any]]:
    """The request bodies the journal says its model calls sent, rebuilt from storage."""
    run = Run.open(journal, secrets=[KEY])
    try:
        session = WireSession(run, difference=lambda rec, req: "")
        recorded = [r for _, r in sorted(session.pending.items()) if r.label == WIRE]
        return [session.recorded_body(rec) for rec in recorded]
    finally:
        run.close()


# ------------------------------------------------------------------------ attacks


@pytest.mark.parametrize(
    ("marks", "message"),
    [
        ({"path": [0]}, "the context node.s marks are not a list"),
        ([{"path": [0], "key": "cache_control"}], "mark 0 of the context node is malformed"),
        ([{"path": [], "key": "k", "value": 1}], "mark 0 of the context node is malformed"),
        ([{"path": [0, 1.5], "key": "k", "value": 1}], "mark 0 of the context node is malformed"),
        ([{"path": [3], "key": "k", "value": 1}], "mark 0: its path does not lead to an object"),
        (
            [{"path": [0, "content"], "key": "k", "value": 1}],
            "mark 0: its path does not lead to an object",
        ),
        (
            [{"path": [0, "role"], "key": "k", "value": 1}],
            "mark 0: its path does not lead to an object",
        ),
    ],
)
def test_a_forged_mark_is_corrupt_naming_the_step(marks: Any, message: str) -> None:
    items = [{"role": "user", "content": "hi"}]
    with pytest.raises(Corrupt, match=f"step 7: {message}"):
        remark(items, marks, where="step 7")


def test_markers_nested_past_the_depth_limit_are_left_as_sent() -> None:
    deep: Any = {"cache_control": {"type": "ephemeral"}}
    for _ in range(40):
        deep = {"inner": deep}
    items = [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": 1}]}, deep]
    plain, marks = unmark(items, ("cache_control",))
    assert plain[1] is deep and marks == [
        {"path": [0, "content", 0], "key": "cache_control", "value": 1}
    ]
    assert remark(plain, marks, where="here") == items
    assert items[0]["content"][0]["cache_control"] == 1  # the request itself is not changed


# ------------------------------------------------------------- new storage shape


def test_a_message_is_stored_once_with_and_without_cache_control(tmp_path: Path) -> None:
    script = [{"tool_calls": [call("Bash", command=f"echo {i} " + "o" * 3000)]} for i in range(12)]
    script.append({"content": "done"})
    with WireFake(script) as fake:
        out = drive(tmp_path / "j", fake, api="anthropic", cwd=tmp_path / "a", cache_control=True)
        assert out.error is None and out.client_error is None, out.client_error
        sent = [s.body for s in fake.turn_requests()]
        assert all("cache_control" in json.dumps(r["messages"][-1]) for r in sent)
    journal = read_journal(tmp_path / "j")
    nodes = [journal.load(str(e["in"])) for e in intents(tmp_path / "j")]
    assert len(nodes) == 13
    # each node names the previous one and adds the reply and the tool's output only
    assert [n["base"] for n in nodes[1:]] == [str(e["in"]) for e in intents(tmp_path / "j")[:-1]]
    assert [len(n["add"]) for n in nodes[1:]] == [2] * 12
    added = [ref for n in nodes for ref in n["add"]]
    assert len(added) == len(set(added)) == 1 + 2 * 12  # every message stored once
    for ref in added:
        assert b"cache_control" not in journal.blob(ref)
    for index, node in enumerate(nodes):  # the request's own marker, on its last message
        last = 2 * index
        assert node["marks"] == [
            {"path": [last, "content", 0], "key": "cache_control", "value": {"type": "ephemeral"}}
        ]
        assert len(canonical(node)) < 400  # bounded by the new items, not the run's length


@pytest.mark.parametrize("stream", [False, True])
def test_a_marked_conversation_replays_byte_exact_and_rebuilds_each_request(
    tmp_path: Path, stream: bool
) -> None:
    journal = tmp_path / "j"
    with WireFake(SCRIPT) as fake:
        first = drive(
            journal, fake, api="anthropic", cwd=tmp_path / "a", stream=stream, cache_control=True
        )
        assert first.error is None and first.client_error is None, first.client_error
        sent = [s.body for s in fake.turn_requests()]
        second = drive(
            journal, fake, api="anthropic", cwd=tmp_path / "b", stream=stream, cache_control=True
        )
        assert second.error is None and second.client_error is None, second.client_error
        assert fake.count == 4  # nothing went upstream again
    assert second.handler.replayed == 4
    assert first.transcript is not None and second.transcript is not None
    assert second.transcript.raw == first.transcript.raw
    assert len(sent) == 4
    # the conversation each request sent, markers back where it had them (the gateway
    # forwards the messages untouched; it names the upstream's model)
    assert [canonical(r["messages"]) for r in rebuilt_requests(journal)] == [
        canonical(s["messages"]) for s in sent
    ]


# ------------------------------------------------------------------- old journals


def _golden(tmp_path: Path) -> Path:
    journal = tmp_path / "j"
    shutil.copytree(GOLDEN, journal)
    return journal


def test_the_old_journal_is_of_the_old_shape(tmp_path: Path) -> None:
    journal = _golden(tmp_path)
    assert all(len(p.name) == 64 for p in (journal / "blobs").iterdir())  # flat blobs
    loaded = read_journal(journal)
    nodes = [loaded.load(str(e["in"])) for e in intents(journal)]
    assert [n["base"] for n in nodes] == [None] * 4 and "marks" not in nodes[3]
    assert [len(n["add"]) for n in nodes] == [1, 3, 5, 7]


def test_an_old_journal_of_marked_messages_still_replays_byte_exact(tmp_path: Path) -> None:
    journal = _golden(tmp_path)
    recorded = read_journal(journal)
    answers = [
        recorded.blob(str(e["out"]["blob"]))
        for e in recorded.entries
        if e.get("name") == "wire" and e.get("status") == "ok"
    ]
    before = rebuilt_requests(journal)
    with WireFake(SCRIPT) as fake:
        out = drive(
            journal, fake, api="anthropic", cwd=tmp_path / "a", stream=True, cache_control=True
        )
        assert out.error is None and out.client_error is None, out.client_error
        assert fake.count == 0
    assert out.handler.replayed == 4
    assert out.transcript is not None and out.transcript.raw == answers
    assert all("cache_control" in json.dumps(r["messages"][-1]) for r in before)
    assert (tmp_path / "a" / "hello.txt").read_text() == "hello\n"


def test_an_old_journal_resumed_mid_conversation_records_the_next_call_exactly(
    tmp_path: Path,
) -> None:
    journal = _golden(tmp_path)
    segment = journal / "000001.jsonl"
    lines = segment.read_bytes().splitlines(keepends=True)
    last = next(
        i
        for i, line in enumerate(lines)
        if json.loads(line).get("status") == "started" and json.loads(line).get("pos") == 4
    )
    segment.write_bytes(b"".join(lines[:last]))  # the fourth call was never made
    with WireFake(SCRIPT) as fake:
        out = drive(
            journal, fake, api="anthropic", cwd=tmp_path / "a", stream=True, cache_control=True
        )
        assert out.error is None and out.client_error is None, out.client_error
        assert fake.count == 1
        sent = fake.turn_requests()[0].body
    assert out.handler.replayed == 3
    assert canonical(rebuilt_requests(journal)[3]["messages"]) == canonical(sent["messages"])
    new = read_journal(journal).load(str(intents(journal)[3]["in"]))
    assert "marks" in new and not any(
        b"cache_control" in read_journal(journal).blob(r) for r in new["add"]
    )
