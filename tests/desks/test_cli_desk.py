"""The ``cli`` desk kind through ``assay desk run`` on an embedded forge: a real agent
process (the test agent client, through the ``generic`` profile) behind the gateway."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from tests.desks.cli_helpers import (
    AGENT,
    KEY,
    SCRIPT,
    add_cli_desk,
    agent_rows,
    call,
    kill_and_resume,
    processes_in,
)
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake
from tests.forge_fixtures import wait_until


def test_a_cli_desk_runs_the_agent_and_journals_every_call(
    world: World, upstream_key: None
) -> None:
    world.add_briefs(brief_text("greet", body="Write hello.txt."))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake)
        done = world.desk("cli", "--once")
        assert done.returncode == 0, done.stderr
        assert fake.count == 3
    assert world.tree("greet").keys() >= {"hello.txt"}
    journal = world.journal("greet")
    wires = [e for e in journal.entries if e.get("name") == "wire" and e["status"] == "ok"]
    assert len(wires) == 3
    review = world.review("greet")
    assert review is not None and review.state == "ready"
    raw = json.dumps(journal.entries)
    assert KEY not in raw


def test_assay_history_lists_every_tool_call_the_agent_ran(
    world: World, upstream_key: None, tmp_path: Path
) -> None:
    world.add_briefs(brief_text("greet", body="Write hello.txt."))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake, api="anthropic")
        assert world.desk("cli", "--once").returncode == 0
    rows = agent_rows(world, "greet", tmp_path / "x")
    assert len(rows) == 2
    assert "Write" in rows[0] and "hello.txt" in rows[0]
    assert "Bash" in rows[1] and "cat hello.txt" in rows[1]
    status = world.assay("status", "--forge", world.url, "--json")
    assert status.returncode == 0, status.stderr
    (row,) = json.loads(status.stdout)["briefs"]
    assert row["model_calls"] == 3 and row["tokens"] == 360


CRASH_SCRIPT = [
    {"tool_calls": [call("Bash", command=f"echo step {i} >> log.txt")]} for i in range(9)
] + [{"content": "done"}]


@pytest.mark.slow
@pytest.mark.parametrize("api", ["openai-responses", "anthropic --stream"])
def test_a_cli_desk_killed_at_three_random_instants_pays_each_call_once(
    world: World, upstream_key: None, tmp_path: Path, api: str
) -> None:
    world.add_briefs(brief_text("crash"), brief_text("clean"))
    with WireFake(CRASH_SCRIPT) as fake:
        add_cli_desk(world, fake, api=api.split()[0], stream="--stream" in api, lease="2s")
        clean = world.desk("cli", "--once", "--brief", "clean")
        assert clean.returncode == 0, clean.stderr
        assert fake.count == 10
        work = world.root / "machine-a" / "work" / "cli" / "crash"
        final = kill_and_resume(
            world,
            "cli",
            "crash",
            sorted(random.sample(range(1, 10), 3)),
            reached=lambda n: fake.count >= 10 + n,
            timeout=60,
            after_kill=lambda: wait_until(
                lambda: not processes_in(work), timeout=10, what="the CLI to die too"
            ),
        )
        assert final.returncode == 0, final.stderr
        paid = fake.count - 10
    assert 10 <= paid <= 10 + 3
    assert world.tree("crash") == world.tree("clean")
    log = world.show("assay/crash:log.txt")
    assert log == "".join(f"step {i}\n" for i in range(9))
    assert len(agent_rows(world, "crash", tmp_path / "x")) == 9


def test_a_spent_budget_pauses_the_cli_desk_until_main_raises_it(
    world: World, upstream_key: None
) -> None:
    world.add_briefs(brief_text("pay", budget={"model_calls": 2}))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake, api="anthropic")
        paused = world.desk("cli", "--once")
        assert paused.returncode == 7, paused.stdout + paused.stderr
        assert fake.count == 2
        record = world.claim("pay")
        assert record is not None and record.state == "waiting" and record.waiting_for == "budget"
        world.add_briefs(brief_text("pay", budget={"model_calls": 5}))
        done = world.desk("cli", "--once")
        assert done.returncode == 0, done.stdout + done.stderr
        assert fake.count == 3  # the two paid calls replayed, the refused one paid once
    budget = [e for e in world.journal("pay").entries if e["kind"] == "budget"]
    assert len(budget) == 1 and budget[0]["limit"] == "model_calls"


DRIFT = [
    {"tool_calls": [call("Bash", command="cat /proc/sys/kernel/random/uuid")]},
    {"tool_calls": [call("Write", path="done.txt", content="done\n")]},
    {"content": "done"},
]


@pytest.mark.parametrize("on_divergence", ["fail", "fork"])
def test_a_tool_whose_output_changes_on_resume_diverges(
    world: World, upstream_key: None, on_divergence: str
) -> None:
    world.add_briefs(brief_text("drift", budget={"model_calls": 2}))
    with WireFake(DRIFT) as fake:
        add_cli_desk(world, fake, api="anthropic", on_divergence=on_divergence)
        assert world.desk("cli", "--once").returncode == 7  # paused after two calls
        world.add_briefs(brief_text("drift", budget={"model_calls": 10}))
        resumed = world.desk("cli", "--once")
        paid = fake.count
    out = resumed.stdout + resumed.stderr
    if on_divergence == "fail":
        assert resumed.returncode == 5, out
        assert "call 3 was recorded as model:wire" in out  # the second call (after cli.base)
        assert "first difference: messages[2].content[0].content" in out
        assert paid == 2  # nothing went upstream after the divergence
    else:
        assert resumed.returncode == 0, out
        assert paid == 4  # the diverged call and the refused one were paid; the first replayed
        (diverged,) = [e for e in world.journal("drift").entries if e["kind"] == "diverged"]
        assert diverged["field"].startswith("messages[2].content[0].content: recorded")


def test_an_unsandboxed_cli_desk_runs(world: World, upstream_key: None) -> None:
    world.add_briefs(brief_text("plain"))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake, sandbox={"isolation": "off", "network": "host"})
        done = world.desk("cli", "--once")
        assert done.returncode == 0, done.stdout + done.stderr
        assert fake.count == 3 and "hello.txt" in world.tree("plain")
    (start,) = [e for e in world.journal("plain").entries if e["kind"] == "start"]
    assert start["sandbox"]["sandboxed"] is False  # recorded as unsandboxed


def test_a_cli_with_a_config_of_its_own_is_set_up_from_the_desks_env_and_files(
    world: World, upstream_key: None
) -> None:
    """A CLI with no profile, as docs/agent-clis.md says to set one up: it reads its base URL
    from a file in its HOME and its key from a variable it names, nothing the generic
    profile sets (``--config`` makes the test client ignore those)."""
    world.add_briefs(brief_text("greet", body="Write hello.txt."))
    config = '{"base_url": "{gateway_url}", "key_env": "MY_CLI_KEY", "mcp": "{mcp_url}"}'
    with WireFake(SCRIPT) as fake:
        add_cli_desk(
            world,
            fake,
            cli={
                "command": [
                    sys.executable,
                    str(AGENT),
                    "--api",
                    "openai-chat",
                    "--config",
                    "{home}/.my-cli/config.json",
                    "{prompt}",
                ],
                "env": {"MY_CLI_KEY": "{token}"},
                "files": {".my-cli/config.json": config},
            },
        )
        done = world.desk("cli", "--once")
        assert done.returncode == 0, done.stdout + done.stderr
        assert fake.count == 3  # every call reached the upstream through the gateway
    assert world.tree("greet").keys() >= {"hello.txt"}


@pytest.mark.parametrize(
    ("cli", "field", "says"),
    [
        ({"command": ["my-cli", "--key={token}"]}, "cli.command[1]", "may not be on a command"),
        ({"env": {"MY KEY": "{token}"}}, "cli.env", "'MY KEY' is not an environment variable"),
        ({"files": {"../x.json": "{}"}}, "cli.files", "'../x.json' must be a path inside"),
        ({"files": {"/etc/x": "{}"}}, "cli.files", "'/etc/x' must be a path inside the CLI's"),
    ],
    ids=["token-in-argv", "bad-env-name", "file-outside-home", "absolute-file"],
)
def test_a_desks_cli_setup_that_would_leak_or_escape_is_refused_naming_the_field(
    world: World, upstream_key: None, cli: dict[str, object], field: str, says: str
) -> None:
    world.add_briefs(brief_text("greet"))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake, cli=cli)
        done = world.desk("cli", "--once")
        assert fake.count == 0
    assert done.returncode == 65, done.stdout + done.stderr
    assert "cli.yaml line" in done.stderr and field in done.stderr, done.stderr
    assert says in done.stderr
    assert world.claim("greet") is None  # refused before anything was claimed
