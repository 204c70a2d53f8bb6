"""Bad input to a ``cli`` desk: each a typed error with its exit code and a message naming
the desk file and field, and nothing half-written (no branch, or a journal that verifies)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.desks.cli_helpers import SCRIPT, add_cli_desk
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake


def set_cli(world: World, **fields: object) -> Path:
    path = world.desks / "cli.yaml"
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    manifest["cli"].update(fields)
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return path


def test_an_unknown_profile_is_refused_naming_the_field(world: World, upstream_key: None) -> None:
    world.add_briefs(brief_text("b1"))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake)
        path = set_cli(world, profile="teleporter")
        done = world.desk("cli", "--once")
        assert fake.received == 0
    assert done.returncode == 65
    assert str(path) in done.stderr and "cli.profile" in done.stderr
    assert "teleporter" in done.stderr and "claude-code" in done.stderr
    assert world.branch_tip("b1") is None and world.claim("b1") is None


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        (
            {"command": ["no-such-agent-cli-xyz", "{prompt}"]},
            "cli.yaml: cli.command: the generic CLI 'no-such-agent-cli-xyz' is not installed",
        ),
        (  # the profile's own program, not on the desk's PATH: how to install it
            {"profile": "claude-code", "command": None},
            "cli.yaml: cli.profile (claude-code's default command): the claude-code CLI "
            "'claude' is not installed (not on PATH): install it with "
            "`npm install -g @anthropic-ai/claude-code`",
        ),
    ],
)
def test_a_cli_that_is_not_installed_is_refused_before_anything_runs(
    world: World, upstream_key: None, fields: dict[str, object], says: str
) -> None:
    # The desk's PATH holds no ``claude`` whatever this machine has installed.
    path = os.pathsep.join(
        folder
        for folder in os.environ.get("PATH", "").split(os.pathsep)
        if folder and not (Path(folder) / "claude").exists()
    )
    world.add_briefs(brief_text("b1"))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake)
        set_cli(world, **fields)
        done = world.assay(*world.desk_args("cli", "--once"), extra={"PATH": path})
        assert fake.received == 0
    assert done.returncode == 65, done.stdout + done.stderr
    assert says in " ".join(done.stderr.split()), done.stderr
    assert world.branch_tip("b1") is None
    assert world.claim("b1") is None  # refused before the claim: no fence moved


def test_a_cli_that_exits_at_once_is_bad_input_naming_its_command(
    world: World, upstream_key: None
) -> None:
    world.add_briefs(brief_text("b1"))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake)
        set_cli(world, command=["sh", "-c", "echo unknown option --frobnicate >&2; exit 2"])
        done = world.desk("cli", "--once")
        assert fake.received == 0
    assert done.returncode == 65, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "cli.yaml: cli.command: the agent CLI exited 2 before calling its model" in out
    assert "--frobnicate" in out
    journal = world.journal("b1")  # what reached the forge verifies, and has no end
    assert not [e for e in journal.entries if e["kind"] == "end"]


def test_a_cli_asking_a_route_the_gateway_lacks_is_told_and_the_desk_log_names_it(
    world: World, upstream_key: None
) -> None:
    # A CLI speaking an API route the gateway does not serve (here Gemini's embedContent)
    # gets a 404 whose message says which API it speaks; the desk's stderr names the route.
    client = (
        "import json, os, sys, urllib.request, urllib.error\n"
        "url = os.environ['GOOGLE_GEMINI_BASE_URL'] + '/v1beta/models/m:embedContent'\n"
        "req = urllib.request.Request(url, data=b'{}', method='POST',\n"
        "    headers={'x-goog-api-key': os.environ['GEMINI_API_KEY']})\n"
        "try:\n    urllib.request.urlopen(req)\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(json.load(e)['error']['message'], file=sys.stderr)\n"
        "sys.exit(1)\n"
    )
    world.add_briefs(brief_text("b1"))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake)
        set_cli(world, command=[sys.executable, "-c", client])
        done = world.desk("cli", "--once")
        assert fake.received == 0
    assert done.returncode == 65, done.stdout + done.stderr
    said = (
        "no gateway route for POST /v1beta/models/m:embedContent: "
        "the desk's CLI speaks the Gemini API"
    )
    err = " ".join(done.stderr.split())
    assert f"cli.yaml: {said}" in err  # logged as it happened
    assert f"cli.yaml: cli.api: the agent CLI exited 1 before calling its model: {said}" in err
    assert said in " ".join(done.stdout.split()) + err  # what the CLI itself printed, too


def test_a_cli_that_hangs_is_stopped_at_its_timeout(world: World, upstream_key: None) -> None:
    world.add_briefs(brief_text("b1"))
    marker = "assay-hang-test-4f1c"
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake)
        set_cli(world, command=[sys.executable, "-c", f"import time; time.sleep(600)  # {marker}"])
        set_cli(world, timeout_s="2s")
        done = world.desk("cli", "--once")
    assert done.returncode == 1, done.stdout + done.stderr
    (end,) = [e for e in world.journal("b1").entries if e["kind"] == "end"]
    assert "cli.yaml: cli.timeout_s: the agent CLI ran past 2 s" in end["message"]
    review = world.review("b1")
    assert review is not None and review.state == "closed"
    assert "cli.timeout_s" in review.body
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, marker)]


def _mentions(proc: Path, needle: str) -> bool:
    try:
        return needle in (proc / "cmdline").read_bytes().decode("utf-8", "replace")
    except OSError:
        return False


@pytest.mark.parametrize("fault", ["500", "garbage"])
def test_an_upstream_that_fails_is_unavailable_naming_the_model(
    world: World, upstream_key: None, fault: str
) -> None:
    world.add_briefs(brief_text("b1"))
    with WireFake(SCRIPT) as fake:
        fake.inject("garbage" if fault == "garbage" else 500, times=10)
        add_cli_desk(world, fake)
        done = world.desk("cli", "--once")
    assert done.returncode == 69, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "cli.yaml: model: upstream-model" in out
    journal = world.journal("b1")
    assert not [e for e in journal.entries if e.get("name") == "wire" and e["status"] == "ok"]


def test_a_git_lock_left_by_a_killed_holder_does_not_stop_the_next(
    world: World, upstream_key: None
) -> None:
    world.add_briefs(brief_text("b1"))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake)
        work = world.root / "machine-a" / "work" / "cli" / "b1"
        (work / ".git").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        (work / ".git" / "index.lock").write_text("")  # what git killed mid-commit leaves
        done = world.desk("cli", "--once")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hello.txt" in world.tree("b1")
