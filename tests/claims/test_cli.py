"""``assay claim`` end to end: exit codes 0/3/4/6/65, --json, --skew and ASSAY_CLAIM_SKEW."""

from __future__ import annotations

import json
from pathlib import Path

from assay.claims import ClaimStore
from assay.forge import open_forge
from assay.plumbing import Identity, RefUpdate
from tests.conftest import AssayRunner
from tests.forge_fixtures import free_port, wait_until


def test_acquire_renew_release_and_busy(run_assay: AssayRunner, forge_path: Path) -> None:
    forge = ["--forge", str(forge_path)]
    done = run_assay("claim", "acquire", "b1", "--desk", "coder", *forge)
    assert done.returncode == 0, done.stderr
    holder = done.stdout.strip()
    assert len(holder) == 32 and "fence 1" in done.stderr
    busy = run_assay("claim", "acquire", "b1", "--desk", "other", "--json", *forge)
    assert busy.returncode == 3
    payload = json.loads(busy.stdout)
    assert payload["status"] == "busy" and payload["details"]["claim"]["desk"] == "coder"
    renewed = run_assay("claim", "renew", "b1", "--holder", holder, "--json", *forge)
    assert renewed.returncode == 0 and json.loads(renewed.stdout)["claim"]["fence"] == 1
    stranger = run_assay("claim", "renew", "b1", "--holder", "0" * 32, *forge)
    assert stranger.returncode == 4 and "does not hold" in stranger.stderr
    released = run_assay("claim", "release", "b1", "--holder", holder, *forge)
    assert released.returncode == 0
    again = run_assay("claim", "release", "b1", "--holder", holder, *forge)
    assert again.returncode == 4
    taken = run_assay("claim", "acquire", "b1", "--desk", "other", "--json", *forge)
    assert taken.returncode == 0 and json.loads(taken.stdout)["fence"] == 2

    second = json.loads(taken.stdout)["holder"]
    closed = run_assay("claim", "release", "b1", "--holder", second, "--done", *forge)
    assert closed.returncode == 0
    final = run_assay("claim", "acquire", "b1", "--desk", "coder", *forge)
    assert final.returncode == 3 and "done" in final.stderr


def test_short_leases_with_skew_from_flag_and_env(run_assay: AssayRunner, forge_path: Path) -> None:
    env = {"ASSAY_FORGE": str(forge_path), "ASSAY_CLAIM_SKEW": "0"}
    first = run_assay("claim", "acquire", "b1", "--desk", "a", "--lease", "0.5", env=env)
    assert first.returncode == 0
    with open_forge(str(forge_path)) as forge:
        store = ClaimStore(forge, skew_s=0)

        def expired() -> bool:
            record = store.get("b1")
            return record is not None and store.status(record) == "expired"

        wait_until(expired, timeout=30, what="the half-second lease to pass")
    # A 30 s skew (the flag beats the environment) still protects the holder...
    protected = run_assay("claim", "acquire", "b1", "--desk", "b", "--skew", "30", env=env)
    assert protected.returncode == 3
    # ...while with ASSAY_CLAIM_SKEW=0 the claim is taken over.
    assert run_assay("claim", "acquire", "b1", "--desk", "b", env=env).returncode == 0
    shown = json.loads(run_assay("claim", "show", "b1", "--json", env=env).stdout)
    assert shown["claim"]["desk"] == "b" and shown["claim"]["fence"] == 2
    renew_old = run_assay("claim", "renew", "b1", "--holder", first.stdout.strip(), env=env)
    assert renew_old.returncode == 4


def test_list_and_show(run_assay: AssayRunner, forge_path: Path) -> None:
    env = {"ASSAY_FORGE": str(forge_path)}
    with open_forge(str(forge_path)) as forge:
        for brief in ("alpha", "beta"):
            ClaimStore(forge).acquire(brief, "coder", lease_s=60)
    listed = json.loads(run_assay("claim", "list", "--json", env=env).stdout)
    assert [c["brief"] for c in listed["claims"]] == ["alpha", "beta"]
    assert all(c["status"] == "held" and c["lease_age_s"] >= 0 for c in listed["claims"])
    table = run_assay("claim", "list", env=env)
    assert table.returncode == 0 and "alpha" in table.stdout and "coder" in table.stdout
    shown = run_assay("claim", "show", "alpha", env=env)
    assert "fence: 1" in shown.stdout and "refs/assay/claims/alpha" in shown.stdout
    nothing = run_assay("claim", "show", "gamma", "--json", env=env)
    assert nothing.returncode == 0 and json.loads(nothing.stdout)["claim"] is None


def test_a_hand_edited_claim_is_corrupt_naming_the_ref(
    run_assay: AssayRunner, forge_path: Path
) -> None:
    env = {"ASSAY_FORGE": str(forge_path)}
    with open_forge(str(forge_path)) as forge:
        for brief in ("b1", "b2"):
            ClaimStore(forge).acquire(brief, "coder", lease_s=60)
        ref = "refs/assay/claims/b1"
        tip = forge.fetch(ref)[ref]
        edited = forge.commit(
            {"claim.json": b'{"brief": "b1", "holder": "me!!", "fence": "lots"}\n'},
            parents=[tip],
            message="hand edit",
            author=Identity("someone", "s@example.com"),
        )
        assert forge.push([RefUpdate(ref, edited, expected=tip)]).ok
    for args in (("show", "b1"), ("list",), ("acquire", "b1", "--desk", "x")):
        done = run_assay("claim", *args, env=env)
        assert done.returncode == 6, (args, done.stderr)
        assert "refs/assay/claims/b1" in done.stderr
    listed = run_assay("claim", "list", "--json", env=env)
    payload = json.loads(listed.stdout)
    assert listed.returncode == 6 and payload["status"] == "corrupt"
    assert [c["brief"] for c in payload["claims"]] == ["b2"]
    assert "refs/assay/claims/b1" in payload["corrupt"][0]


def test_bad_input_is_exit_65(run_assay: AssayRunner, forge_path: Path) -> None:
    env = {"ASSAY_FORGE": str(forge_path)}
    for brief in ("../etc", "x" * 101):
        done = run_assay("claim", "acquire", brief, "--desk", "coder", env=env)
        assert done.returncode == 65, brief
    done = run_assay("claim", "list", env={"ASSAY_FORGE": ""})
    assert done.returncode == 65 and "ASSAY_FORGE" in done.stderr
    done = run_assay("claim", "acquire", "b1", "--desk", "c", "--skew", "-3", env=env)
    assert done.returncode == 65
    with open_forge(str(forge_path)) as forge:
        assert forge.ls_refs("refs/assay/") == {}


def test_an_unreachable_forge_is_exit_69(run_assay: AssayRunner) -> None:
    env = {"ASSAY_FORGE_RETRIES": "2", "ASSAY_FORGE_RETRY_SECONDS": "2"}
    url = f"http://127.0.0.1:{free_port()}/forge.git"
    done = run_assay("claim", "acquire", "b1", "--desk", "c", "--forge", url, env=env)
    assert done.returncode == 69 and "unreachable" in done.stderr
