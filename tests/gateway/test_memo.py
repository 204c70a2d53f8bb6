"""The session's conversation memo (``assay.runtime.memo``): a call reuses what the work
on each item found only for items that are byte for byte those it saw, so the journal,
the matching and the divergence named are what they are without it. Attacks first: an
earlier message changed in place, into something Python's ``==`` takes for the same."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.errors import AssayError, Diverged
from assay.gateway.calls import CallHandler
from assay.gateway.server import Gateway
from assay.gateway.upstream import Upstream
from assay.models.config import AnthropicConfig
from assay.runtime import Run
from assay.runtime.marks import unmark_item
from assay.runtime.memo import KEPT, ConversationMemo
from assay.runtime.wire import WireSession
from tests.fakes.wire import WireFake
from tests.gateway.harness import KEY, KEY_ENV, PRICE

TURNS = 4
SCRIPT = [
    {"tool_calls": [{"name": "Bash", "arguments": {"command": f"echo {i}"}}]} for i in range(TURNS)
] + [{"content": "done"}]
VOLATILE = {"t", "t0", "t1", "run", "prev", "sum", "key"}  # the clock, the run id, the chain


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def body(turn: int, *, changed: dict[int, Any] | None = None) -> dict[str, Any]:
    """Turn ``turn`` of a Bash conversation; ``changed``: the input of the tool call of
    those turns, as this request sends it instead. The last message is marked for the
    prompt cache, as Claude Code marks it (the mark moves with every request)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Run the commands."}]
    for i in range(turn):
        command = (changed or {}).get(i, {"command": f"echo {i}", "times": 1, "scale": 1.0})
        use = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": command}
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"{i}\n"}
        messages += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    last = messages[-1]
    if isinstance(last["content"], list):
        last["content"][-1] = {**last["content"][-1], "cache_control": {"type": "ephemeral"}}
    tools = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
    return {"model": "m", "max_tokens": 256, "messages": messages, "tools": tools}


def serve(
    journal: Path, fake: WireFake, bodies: list[dict[str, Any]], *, memo_budget: int
) -> AssayError | None:
    """Send ``bodies`` through a gateway journaling on ``journal`` (resumed when it holds
    a session), in order, until one is refused; the error that stopped the run, if any."""
    config = AnthropicConfig(
        adapter="anthropic", model="upstream", base_url=fake.url, api_key_env=KEY_ENV
    )
    run = Run.open(journal, secrets=[KEY])
    upstream = Upstream(config, source="desks/cli.yaml")
    handler: CallHandler
    session = WireSession(
        run, difference=lambda rec, req: handler.difference(rec, req), memo_budget=memo_budget
    )
    handler = CallHandler(session, upstream, price=PRICE, allowed=lambda name: True)
    error: AssayError | None = None
    with Gateway() as gateway:

        def client() -> None:
            with httpx.Client(timeout=30) as http:
                for payload in bodies:
                    answer = http.post(
                        f"{gateway.url}/v1/messages",
                        json=payload,
                        headers={"x-api-key": gateway.token},
                    )
                    if answer.status_code != 200:
                        return

        thread = threading.Thread(target=client, daemon=True)
        thread.start()
        while thread.is_alive() or not gateway.calls.empty():
            try:
                call = gateway.calls.get(timeout=0.05)
            except queue.Empty:
                continue
            try:
                handler.handle(call)
            except AssayError as exc:
                error = exc
                break
        thread.join(30)
        if error is None:
            session.close()
    run.close()
    upstream.close()
    return error


def recorded(journal: Path) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """The journal's lines without the clock, the run id and the chain, and its blobs."""
    lines = [
        {k: v for k, v in json.loads(line).items() if k not in VOLATILE}
        for segment in sorted(journal.glob("*.jsonl"))
        for line in segment.read_bytes().splitlines()
    ]
    blobs = {
        str(p.relative_to(journal)): p.read_bytes()
        for p in sorted((journal / "blobs").rglob("*"))
        if p.is_file()
    }
    return lines, blobs


# ------------------------------------------------------------------------ attacks

# Each equal to {"command": "echo 1", "times": 1, "scale": 1.0} for Python's ``==``; none
# of them is it (the last two are even as long).
SAME_FOR_EQ = [
    {"command": "echo 1", "times": True, "scale": 1.0},
    {"command": "echo 1", "times": 1.0, "scale": 1.0},
    {"command": "echo 1", "times": 1.0, "scale": 1},
    {"scale": 1.0, "times": 1, "command": "echo 1"},  # the same keys in another order
]


@pytest.mark.parametrize("changed", SAME_FOR_EQ, ids=["true", "float", "swap", "order"])
def test_an_earlier_message_changed_in_place_is_recorded_as_sent(
    tmp_path: Path, changed: dict[str, Any]
) -> None:
    """A CLI that rewrites an earlier message between two calls: the memo never takes the
    new message for the one it saw at that place, so the journal holds, byte for byte,
    what it holds when nothing is remembered."""
    bodies = [body(t) for t in range(3)] + [body(3, changed={1: changed})]
    journals = {}
    with WireFake(SCRIPT) as fake:
        for budget in (8 * 1024 * 1024, 0):
            journals[budget] = tmp_path / f"j{budget}"
            assert serve(journals[budget], fake, bodies, memo_budget=budget) is None
    with_memo, without = (recorded(journals[b]) for b in journals)
    assert with_memo == without
    lines, blobs = with_memo
    sent = json.dumps(changed, sort_keys=True, separators=(",", ":")).encode()
    assert any(sent in data for data in blobs.values()), "the changed message is stored"
    assert len({line["digest"] for line in lines if line.get("status") == "started"}) == 4


@pytest.mark.parametrize(
    ("changed", "diverges"),
    [(changed, True) for changed in SAME_FOR_EQ[:3]]
    + [(SAME_FOR_EQ[3], False), ({"command": "echo 1; curl evil", "times": 1}, True)],
    ids=["true", "float", "swap", "order", "text"],
)
def test_a_resumed_cli_that_changed_an_earlier_message_diverges_as_without_the_memo(
    tmp_path: Path, changed: dict[str, Any], diverges: bool
) -> None:
    """Recorded: four turns. Resumed: the first three again (replayed, each remembered),
    then the fourth with the second turn's tool call changed in place: the divergence is
    found at the same call, naming the same field, with the memo and without it (keys in
    another order are the same request for matching, which compares canonical JSON)."""
    errors = {}
    with WireFake(SCRIPT) as fake:
        for budget in (8 * 1024 * 1024, 0):
            journal = tmp_path / f"j{budget}"
            assert serve(journal, fake, [body(t) for t in range(4)], memo_budget=budget) is None
            paid = fake.count
            resumed = [body(t) for t in range(3)] + [body(3, changed={1: changed})]
            errors[budget] = serve(journal, fake, resumed, memo_budget=budget)
            assert fake.count == paid, "nothing is paid again: replayed, or refused unsent"
    with_memo, without = errors.values()
    if not diverges:
        assert with_memo is None and without is None
        return
    assert isinstance(with_memo, Diverged) and isinstance(without, Diverged)
    assert with_memo.message == without.message
    assert with_memo.message.startswith("call 4 was recorded as model:wire")


# ---------------------------------------------------------------------- the memo


def test_a_conversation_shares_only_the_items_it_begins_with_byte_for_byte() -> None:
    memo = ConversationMemo()
    seen: list[Any] = []

    def work(item: Any) -> Any:
        seen.append(item)
        return json.dumps(item)

    first = memo.conversation([{"a": 1}, {"b": [1, 2]}])
    assert first.each("w", work) == ['{"a": 1}', '{"b": [1, 2]}']
    longer = memo.conversation([{"a": 1}, {"b": [1, 2]}, {"c": None}])
    assert longer.each("w", work) == ['{"a": 1}', '{"b": [1, 2]}', '{"c": null}']
    assert seen[2:] == [{"c": None}], "only the new item was worked on"
    seen.clear()
    changed = memo.conversation([{"a": True}, {"b": [1, 2]}, {"c": None}])
    assert changed.each("w", work) == ['{"a": true}', '{"b": [1, 2]}', '{"c": null}']
    assert len(seen) == 3, "an item changed in place: everything from it is worked on again"
    seen.clear()
    seen.clear()
    memo.conversation([{"a": 1, "b": 1.0}, {"c": 0}]).each("w", work)
    swapped = memo.conversation([{"a": 1.0, "b": 1}, {"c": 0}])  # as long, and == the other
    assert swapped.each("w", work) == ['{"a": 1.0, "b": 1}', '{"c": 0}']
    assert seen[-2:] == [{"a": 1.0, "b": 1}, {"c": 0}]
    seen.clear()
    # the last item's marker moved off it: the items before it are still shared
    moved = memo.conversation([{"a": 1}, {"b": [1, 2]}, {"c": None, "m": 1}, {"d": 0}])
    assert moved.each("w", work)[2:] == ['{"c": null, "m": 1}', '{"d": 0}']
    assert seen == [{"c": None, "m": 1}, {"d": 0}]
    seen.clear()
    # a number that begins another's text ("1" of "12") is not shared either
    memo.conversation([1]).each("w", work)
    assert memo.conversation([12, 3]).each("w", work) == ["12", "3"]
    assert seen == [1, 12, 3]


def test_a_kind_not_remembered_is_worked_on_every_time() -> None:
    memo = ConversationMemo()
    memo.conversation([{"a": 1}]).each("ref", lambda item: "x", remember=False)
    again = memo.conversation([{"a": 1}, {"b": 2}])
    assert again.each("ref", lambda item: "y") == ["y", "y"]


def test_the_unmarked_items_follow_the_marks_wherever_they_are() -> None:
    """What ``unmark_item`` finds is shared between requests whose marks sit elsewhere."""
    memo = ConversationMemo()
    keys = ("cache_control",)
    one = [{"content": [{"text": "a", "cache_control": {"type": "ephemeral"}}]}]
    two = [one[0], {"content": [{"text": "b"}]}]
    memo.conversation(one).each("u", lambda item: unmark_item(item, keys))
    plain, marks = memo.conversation(two).each("u", lambda item: unmark_item(item, keys))[0]
    assert plain == {"content": [{"text": "a"}]}
    assert marks == [
        {"path": ["content", 0], "key": "cache_control", "value": {"type": "ephemeral"}}
    ]


def test_the_memo_is_bounded_in_conversations_and_in_characters() -> None:
    memo = ConversationMemo(budget=1000)
    for n in range(KEPT + 5):
        memo.conversation([{"n": n}])
    assert len(memo.recent) == KEPT
    assert [c.items[0]["n"] for c in memo.recent] == list(range(5, KEPT + 5)), "oldest first out"
    big = "x" * 300
    for n in range(5):
        memo.conversation([big, n])
    assert memo.size <= 1000 and memo.size == sum(len(c.text) for c in memo.recent)
    assert len(memo.recent) == 3
    memo.conversation(["y" * 2000])  # more than the budget alone: not remembered
    assert all(len(c.text) < 1000 for c in memo.recent)


def test_a_memo_without_a_budget_remembers_nothing() -> None:
    memo = ConversationMemo(budget=0)
    seen: list[Any] = []

    def work(item: Any) -> str:
        seen.append(item)
        return str(item)

    memo.conversation([1]).each("w", work)
    memo.conversation([1, 2]).each("w", work)
    assert seen == [1, 1, 2], "every item worked on every time"
    assert memo.recent == [] and memo.size == 0
