"""``assay replay --desk``: a cli run's recorded model calls against the matching a resume
would use now.

A resumed CLI's requests are matched against the journal by the digest of their normalised
form: the desk's volatile-output masks and its profile's normalisation. The replay rebuilds
each recorded request as it was sent and says whether a resume under the desk as it stands
would still match it; a changed mask that touches a recorded tool output is named at the
first call it would break, before any resume pays for the divergence.
"""

from __future__ import annotations

import json

import yaml

from tests.desks.cli_helpers import SCRIPT, add_cli_desk
from tests.desks.world import World, brief_text
from tests.fakes.wire import WireFake


def test_replay_of_a_cli_run_names_the_first_call_a_changed_desk_would_not_match(
    world: World, upstream_key: None
) -> None:
    world.add_briefs(brief_text("greet", body="Write hello.txt."))
    with WireFake(SCRIPT) as fake:
        add_cli_desk(world, fake)
        assert world.desk("cli", "--once").returncode == 0
        paid = fake.count
    desk = world.desks / "cli.yaml"
    replay = ("replay", "--brief", "greet", "--forge", world.url, "--desk", str(desk))

    same = world.assay(*replay)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "every one of 3 recorded model calls" in same.stdout
    as_json = json.loads(world.assay(*replay, "--json").stdout)
    assert as_json == {"matched": True, "calls": 3, "failure": None}

    # The desk now masks "hello" in its tools' output: the first request that carries one
    # (the second call, with the Write tool's result naming hello.txt) would no longer
    # match; the first still would.
    manifest = yaml.safe_load(desk.read_text())
    manifest["cli"]["volatile_output"] = ["hel+o"]
    desk.write_text(yaml.safe_dump(manifest))
    changed = world.assay(*replay, "--json")
    assert changed.returncode == 5, changed.stdout + changed.stderr
    found = json.loads(changed.stdout)
    assert found["matched"] is False and found["calls"] == 2
    assert "model call 2" in found["failure"]["message"]
    assert "a resumed CLI would diverge there" in found["failure"]["message"]
    assert fake.count == paid  # the replay read the journal: nothing went upstream


def test_replay_refuses_both_or_neither_of_a_function_and_a_desk(
    world: World, tmp_path: object
) -> None:
    neither = world.assay("replay", "--journal", str(world.root))
    assert neither.returncode == 65 and "exactly one of PATH.py:FUNCTION or --desk" in (
        neither.stderr
    )
