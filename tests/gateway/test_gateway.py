"""The gateway end to end in-process: real HTTP on loopback, a real Run and journal, a
real scripted upstream. Attack tests first: the token, the key, undeclared tools."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import jsonschema
import pytest

from assay.errors import Denied, Diverged, Paused, Unavailable
from assay.gateway.server import Gateway
from assay.journal import read_journal
from assay.runtime import Budget, Event, LocalEventStore
from tests.conftest import REPO_ROOT
from tests.fakes.wire import WireFake
from tests.gateway.harness import APIS, KEY, KEY_ENV, drive

SCHEMA = json.loads((REPO_ROOT / "docs" / "journal-entry.schema.json").read_text())


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


SCRIPT = [
    {"tool_calls": [call("Write", path="hello.txt", content="hello\n")]},
    {"tool_calls": [call("Bash", command="cat hello.txt")]},
    {"content": "all done"},
]


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def wire_entries(journal: Path) -> list[dict[str, object]]:
    return [
        e
        for e in read_journal(journal).entries
        if e["kind"] == "step" and e.get("name") == "wire" and e.get("status") == "ok"
    ]


def tree(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


# ------------------------------------------------------------------------ attacks


@pytest.mark.parametrize("route", ["/v1/messages", "/v1/chat/completions", "/v1/responses"])
def test_requests_without_the_run_token_get_401_and_never_reach_the_run(route: str) -> None:
    with Gateway() as gateway:
        for headers in (
            {},
            {"x-api-key": "wrong"},
            {"authorization": "Bearer wrong"},
            {"authorization": gateway.token},  # not a bearer
            {"x-api-key": gateway.token[:-1]},
        ):
            answer = httpx.post(gateway.url + route, json={"messages": []}, headers=headers)
            assert answer.status_code == 401, headers
            assert "error" in answer.json()
        assert gateway.calls.empty()


def test_the_unix_socket_checks_the_token_too() -> None:
    with Gateway() as gateway:
        transport = httpx.HTTPTransport(uds=str(gateway.socket_path))
        with httpx.Client(transport=transport) as client:
            answer = client.post(
                "http://127.0.0.1/v1/messages", json={}, headers={"x-api-key": "x"}
            )
        assert answer.status_code == 401
        assert oct(gateway.socket_path.stat().st_mode & 0o777) == "0o600"
        assert gateway.calls.empty()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True])
def test_the_real_key_stays_in_the_desk_and_out_of_the_journal(
    tmp_path: Path, api: str, stream: bool
) -> None:
    with WireFake(SCRIPT) as fake:
        outcome = drive(tmp_path / "j", fake, api=api, cwd=tmp_path / "w", stream=stream)
        assert outcome.error is None and outcome.client_error is None
        sent = fake.turn_requests()[0].headers
        presented = (
            sent.get("x-api-key")
            or sent.get("x-goog-api-key")
            or sent.get("authorization", "").removeprefix("Bearer ")
        )
        assert presented == KEY  # the upstream got the real key, in its own header
        assert all(outcome.token not in json.dumps(s.headers) for s in fake.seen)
    assert outcome.transcript is not None
    for raw in outcome.transcript.raw:
        assert KEY.encode() not in raw
    for path in (tmp_path / "j").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert KEY.encode() not in data and outcome.token.encode() not in data


@pytest.mark.parametrize("api", APIS)
def test_an_undeclared_tool_is_refused_before_the_cli_sees_it(tmp_path: Path, api: str) -> None:
    script = [{"tool_calls": [call("Teleport", to="prod")]}, {"content": "never"}]
    with WireFake(script) as fake:
        outcome = drive(tmp_path / "j", fake, api=api, cwd=tmp_path / "w")
        assert isinstance(outcome.error, Denied)
        assert "Teleport" in outcome.error.message
        again = drive(tmp_path / "j", fake, api=api, cwd=tmp_path / "w2")
        assert fake.count == 1  # the refusal is replayed, not paid again
    error = outcome.client_error
    assert error is not None and getattr(error, "status", 0) == 403
    assert "Teleport" in error.body and "prod" not in error.body  # type: ignore[attr-defined]
    assert not (tmp_path / "w").exists() or not list((tmp_path / "w").iterdir())
    denied = [e for e in read_journal(tmp_path / "j").entries if e["kind"] == "denied"]
    assert len(denied) == 1 and "Teleport" in str(denied[0]["reason"])
    assert isinstance(again.error, Denied)


# ---------------------------------------------------------------- record / replay


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True])
def test_a_resumed_cli_is_answered_from_the_journal_byte_for_byte(
    tmp_path: Path, api: str, stream: bool
) -> None:
    journal = tmp_path / "j"
    with WireFake(SCRIPT) as fake:
        first = drive(journal, fake, api=api, cwd=tmp_path / "a", stream=stream)
        assert first.error is None and first.client_error is None, first.client_error
        assert fake.count == 3
        second = drive(journal, fake, api=api, cwd=tmp_path / "b", stream=stream)
        assert second.error is None and second.client_error is None
        assert fake.count == 3  # nothing paid twice
    assert first.transcript is not None and second.transcript is not None
    assert second.transcript.raw == first.transcript.raw
    assert second.handler.replayed == 3
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    entries = wire_entries(journal)
    assert len(entries) == 3
    assert all(e["usage"]["in_tokens"] == 100 for e in entries)  # type: ignore[index]
    assert entries[0]["usage"]["usd"] == pytest.approx(0.1 + 0.04)  # type: ignore[index]
    assert entries[0]["stream"] is stream
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for entry in read_journal(journal).entries:
        validator.validate(entry)
    done = [t for e in entries for t in e.get("tools", [])]  # type: ignore[attr-defined]
    assert [t["name"] for t in done] == ["Write", "Bash"]
    assert done[1]["output"] == "hello"


def test_a_call_in_flight_at_a_crash_goes_upstream_again_and_only_it(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    with WireFake(SCRIPT) as fake:
        drive(journal, fake, api="anthropic", cwd=tmp_path / "a")
        # Cut the journal back to just after the third call's intent: that call was in flight.
        segment = sorted(journal.glob("*.jsonl"))[0]
        lines = segment.read_bytes().splitlines(keepends=True)
        keep = next(
            i
            for i, line in enumerate(lines)
            if json.loads(line).get("status") == "started" and json.loads(line).get("pos") == 3
        )
        segment.write_bytes(b"".join(lines[: keep + 1]))
        outcome = drive(journal, fake, api="anthropic", cwd=tmp_path / "b")
        assert outcome.error is None and outcome.client_error is None
        assert fake.count == 4
    assert len(wire_entries(journal)) == 3


def test_the_conversation_is_stored_once_per_message(tmp_path: Path) -> None:
    script = [{"tool_calls": [call("Bash", command=f"echo {i}")]} for i in range(12)]
    script.append({"content": "done"})
    with WireFake(script) as fake:
        drive(tmp_path / "j", fake, api="openai-chat", cwd=tmp_path / "a")
    blobs = list((tmp_path / "j" / "blobs").rglob("*"))
    total = sum(p.stat().st_size for p in blobs if p.is_file())
    journal = read_journal(tmp_path / "j")
    intents = [
        e for e in journal.entries if e.get("name") == "wire" and e.get("status") == "started"
    ]
    # every node after the first extends the previous one by the two new messages
    nodes = [journal.load(str(e["in"])) for e in intents]
    assert [len(n["add"]) for n in nodes[1:]] == [2] * 12
    assert total < 40_000


@pytest.mark.parametrize(("first", "then"), [("before", "after"), ("concurrent", "concurrent")])
def test_side_requests_in_another_order_still_match(tmp_path: Path, first: str, then: str) -> None:
    journal = tmp_path / "j"
    with WireFake(SCRIPT) as fake:
        recorded = drive(journal, fake, api="anthropic", cwd=tmp_path / "a", side=first)
        assert recorded.error is None and recorded.client_error is None
        paid = fake.count
        resumed = drive(journal, fake, api="anthropic", cwd=tmp_path / "b", side=then)
        assert resumed.error is None and resumed.client_error is None
        assert fake.count == paid  # every call, side requests included, answered from the journal
    assert resumed.handler.replayed == 6
    routes = [e["route"] for e in read_journal(journal).entries if e.get("status") == "started"]
    assert routes.count("/v1/messages/count_tokens") == 3


def test_side_requests_the_resumed_cli_no_longer_sends_are_skipped(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    with WireFake(SCRIPT) as fake:
        drive(journal, fake, api="anthropic", cwd=tmp_path / "a", side="before")
        paid = fake.count
        resumed = drive(journal, fake, api="anthropic", cwd=tmp_path / "b")
        assert resumed.error is None and fake.count == paid
    assert resumed.handler.replayed == 3


def test_a_turn_the_resumed_cli_no_longer_sends_is_a_divergence(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    with WireFake(SCRIPT) as fake:
        drive(journal, fake, api="anthropic", cwd=tmp_path / "a")
        resumed = drive(journal, fake, api="anthropic", cwd=tmp_path / "b", max_turns=1)
        assert fake.count == 3
    assert isinstance(resumed.error, Diverged)
    assert "call 2 was recorded as model:wire, the agent asked for the end of the session" in (
        resumed.error.message
    )


# ------------------------------------------------------------------- divergence


DRIFT = [
    {"tool_calls": [call("Bash", command="cat /proc/sys/kernel/random/uuid")]},
    {"content": "done"},
]


def test_a_tool_whose_output_changes_diverges_and_fail_stops(tmp_path: Path) -> None:
    with WireFake(DRIFT) as fake:
        drive(tmp_path / "j", fake, api="anthropic", cwd=tmp_path / "a")
        outcome = drive(tmp_path / "j", fake, api="anthropic", cwd=tmp_path / "b")
        assert fake.count == 2
    assert isinstance(outcome.error, Diverged) and outcome.error.code == 5
    assert "call 2" in outcome.error.message
    assert "messages[2].content[0].content" in outcome.error.message
    assert not [e for e in read_journal(tmp_path / "j").entries if e["kind"] == "diverged"]


def test_a_divergence_with_fork_carries_on_live(tmp_path: Path) -> None:
    with WireFake(DRIFT) as fake:
        drive(tmp_path / "j", fake, api="openai-responses", cwd=tmp_path / "a")
        outcome = drive(
            tmp_path / "j", fake, api="openai-responses", cwd=tmp_path / "b", on_divergence="fork"
        )
        assert outcome.error is None and outcome.client_error is None
        assert fake.count == 3  # the first call replayed, the diverged one paid again
    diverged = [e for e in read_journal(tmp_path / "j").entries if e["kind"] == "diverged"]
    assert len(diverged) == 1
    assert diverged[0]["pos"] == 2 and diverged[0]["field"].startswith("input[2].output: recorded")


# ------------------------------------------------------- budget, steering, errors


def test_a_spent_budget_refuses_the_call_and_pauses_until_raised(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    with WireFake(SCRIPT) as fake:
        outcome = drive(
            journal, fake, api="anthropic", cwd=tmp_path / "a", budget=Budget(model_calls=2)
        )
        assert isinstance(outcome.error, Paused) and outcome.error.code == 7
        assert fake.count == 2
        error = outcome.client_error
        assert error is not None and getattr(error, "status", 0) == 400
        assert "budget model_calls exhausted" in error.body  # type: ignore[attr-defined]
        resumed = drive(
            journal, fake, api="anthropic", cwd=tmp_path / "b", budget=Budget(model_calls=5)
        )
        assert resumed.error is None and resumed.client_error is None
        assert fake.count == 3
    assert resumed.transcript is not None and resumed.transcript.final == "all done"


def test_steering_reaches_the_next_model_call_once(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    journal.mkdir()
    LocalEventStore(journal).append(Event(id="s1", kind="signal", text="use tabs", actor="ann"))
    with WireFake(SCRIPT) as fake:
        drive(journal, fake, api="openai-chat", cwd=tmp_path / "a")
        seen = [json.dumps(t.body) for t in fake.turn_requests()]
        assert sum("Steering from ann: use tabs" in s for s in seen) == 1
        assert "use tabs" in seen[0]
        again = drive(journal, fake, api="openai-chat", cwd=tmp_path / "b")
        assert again.error is None and fake.count == 3  # replayed with it, not re-delivered
    intents = [e for e in read_journal(journal).entries if e.get("steer")]
    assert len(intents) == 1


def test_an_upstream_answering_garbage_is_unavailable(tmp_path: Path) -> None:
    with WireFake(SCRIPT) as fake:
        fake.inject("garbage", times=5)
        outcome = drive(tmp_path / "j", fake, api="openai-chat", cwd=tmp_path / "a")
    assert isinstance(outcome.error, Unavailable) and outcome.error.code == 69
    assert "desks/cli.yaml: model:" in outcome.error.message
    assert not wire_entries(tmp_path / "j")  # nothing half-written: no result recorded


def test_an_upstream_answering_500s_is_unavailable_after_its_retries(tmp_path: Path) -> None:
    with WireFake(SCRIPT) as fake:
        fake.inject(500, times=5)
        outcome = drive(tmp_path / "j", fake, api="anthropic", cwd=tmp_path / "a")
        assert fake.failures_sent == 2  # attempts: 2
    assert isinstance(outcome.error, Unavailable)
    assert "after 2 attempts (HTTP 500)" in outcome.error.message
    assert outcome.client_error is not None
    assert not wire_entries(tmp_path / "j")


@pytest.mark.parametrize(
    ("status", "capacity"), [(429, True), (503, True), (529, True), (502, False)]
)
def test_an_upstream_without_capacity_says_so_after_its_retries(
    tmp_path: Path, status: int, capacity: bool
) -> None:
    with WireFake(SCRIPT) as fake:
        fake.inject(status, times=5)
        outcome = drive(tmp_path / "j", fake, api="anthropic", cwd=tmp_path / "a")
        assert fake.failures_sent == 2  # attempts: 2
    error = outcome.error
    assert isinstance(error, Unavailable) and error.code == 69
    assert bool(error.details.get("capacity")) is capacity
    said = "no capacity" if capacity else "unreachable"
    assert f"{said} after 2 attempts (HTTP {status})" in error.message
    if capacity:
        assert error.details["http"] == status


def test_a_retry_after_is_honoured_and_the_call_succeeds(tmp_path: Path) -> None:
    with WireFake(SCRIPT) as fake:
        fake.inject(429, retry_after="0")
        outcome = drive(tmp_path / "j", fake, api="anthropic", cwd=tmp_path / "a")
        assert outcome.error is None and fake.failures_sent == 1 and fake.count == 3


def test_an_upstream_refusing_the_key_is_denied_naming_the_variable(tmp_path: Path) -> None:
    with WireFake(SCRIPT) as fake:
        fake.inject(401)
        outcome = drive(tmp_path / "j", fake, api="openai-chat", cwd=tmp_path / "a")
        assert fake.failures_sent == 1 and fake.count == 0  # not retried
    assert isinstance(outcome.error, Denied) and outcome.error.code == 77
    assert "refused the credentials (HTTP 401)" in outcome.error.message
    assert f"${KEY_ENV}" in outcome.error.message and KEY not in outcome.error.message
    assert not wire_entries(tmp_path / "j")
