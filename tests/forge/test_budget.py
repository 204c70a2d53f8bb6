"""The embedded forge's push budget: a push over it waits, lands, and no window holds more.

Every test serves a real forge on loopback and pushes real commits to it, from Assay's own
push (several clients at once, each with its own cache) and from ``git push``. The budget's
window is a test-sized one (``budget_window`` / ``ASSAY_FORGE_BUDGET_WINDOW_SECONDS``), so a
minute's budget is spent in a second or two.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.errors import BadInput, Corrupt
from assay.forge import Forge, ForgeServer, open_forge
from assay.forge.budget import WINDOW_ENV, window_from_env
from assay.forge.settings import (
    ADMIN,
    ForgeSettings,
    local_settings_tip,
    read_local_settings,
    read_settings,
    record_gate_key,
    record_merge_budget,
    record_push_budget,
    write_settings,
)
from assay.plumbing import ASSAY_IDENTITY, RefUpdate, RetryPolicy
from tests.conftest import AssayRunner
from tests.forge_fixtures import clone
from tests.gatekeys import key_for

ONE_TRY = RetryPolicy(attempts=1, max_seconds=0)  # a push that stalled would fail, not retry


def most_in_window(times: list[float], window: float) -> int:
    """The most of ``times`` that any ``window`` seconds hold (the test's own count)."""
    stamps = sorted(times)
    most, first = 0, 0
    for last, stamp in enumerate(stamps):
        while stamp - stamps[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


def set_budget(forge_path: Path, per_minute: int) -> None:
    with open_forge(str(forge_path)) as local:
        record_push_budget(local, per_minute)


class Landings:
    """The server's ``on_push`` hook: when each accepted push was seen, by the test."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.times.append(time.monotonic())


def push_many(url: str, cache: Path, ref_prefix: str, count: int) -> list[bool]:
    """``count`` new commits pushed one after another to ``ref_prefix<n>``: each ok?"""
    results = []
    with Forge(url, cache_dir=cache, retry=ONE_TRY) as forge:
        for n in range(count):
            commit = forge.commit(
                {"n.txt": f"{ref_prefix}{n}\n".encode()},
                parents=[],
                message=f"push {n}",
                author=ASSAY_IDENTITY,
            )
            result = forge.push([RefUpdate(f"{ref_prefix}{n}", commit, expected=None)])
            results.append(result.ok)
    return results


WINDOW = 3.0  # the test's minute
STALL = "2"  # the clients' stall timer: every waited push waits longer than this


@pytest.fixture
def served(forge_path: Path) -> Iterator[tuple[ForgeServer, Landings]]:
    landings = Landings()
    set_budget(forge_path, 2)
    with ForgeServer(forge_path, on_push=landings, budget_window=WINDOW) as server:
        yield server, landings


def test_a_burst_from_several_clients_lands_whole_within_the_budget(
    forge_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A waited push waits longer than a client's stall timer: only the server's keep-alives
    # keep it from being dropped (one try each: a stall would fail the push).
    monkeypatch.setenv("ASSAY_FORGE_STALL_SECONDS", STALL)
    set_budget(forge_path, 3)
    landings = Landings()
    results: dict[int, list[bool]] = {}
    with ForgeServer(forge_path, on_push=landings, budget_window=WINDOW) as server:

        def client(n: int) -> None:
            results[n] = push_many(server.url, tmp_path / f"cache-{n}", f"refs/heads/c{n}-", 2)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        started = dict(server.started)
        landed = list(server.budget.landed)
    assert results == {n: [True, True] for n in range(3)}
    with open_forge(str(forge_path)) as local:
        refs = local.ls_refs("refs/heads/c")
    assert sorted(refs) == sorted(f"refs/heads/c{n}-{i}" for n in range(3) for i in range(2))
    assert started["budgeted"] == 6
    assert started["throttled"] >= 3  # six pushes, three a window: three had to wait
    assert len(landings.times) == 6
    assert most_in_window(landings.times, WINDOW) <= 3
    assert most_in_window(landed, WINDOW) <= 3
    # It waited: the fourth push landed a whole window after the first.
    assert sorted(landings.times)[3] - min(landings.times) >= WINDOW


def test_git_push_waits_hears_why_and_lands(
    served: tuple[ForgeServer, Landings], tmp_path: Path
) -> None:
    server, _ = served
    work = clone(server.url, tmp_path / "work")
    git = ["git", "-C", str(work), "-c", "http.lowSpeedLimit=1", "-c", f"http.lowSpeedTime={STALL}"]
    ident = ["-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    outputs = []
    for n in range(3):  # the third waits a window, longer than git's stall limit
        (work / "f.txt").write_text(f"{n}\n")
        subprocess.run([*git, "add", "f.txt"], check=True)
        subprocess.run([*git, *ident, "commit", "-qm", f"c{n}"], check=True)
        done = subprocess.run(
            [*git, "push", "origin", f"HEAD:refs/heads/g{n}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stderr)
    assert "push budget (2 per 3 s) is spent" in outputs[2]
    assert "push budget" not in outputs[0]
    assert server.started["throttled"] >= 1
    assert server.started["budgeted"] == 3


def test_a_push_that_moves_nothing_neither_waits_nor_counts(
    served: tuple[ForgeServer, Landings], tmp_path: Path
) -> None:
    server, _ = served
    assert push_many(server.url, tmp_path / "a", "refs/heads/s", 2) == [True, True]
    # The budget is spent; a push stale against the refs is refused at once.
    with Forge(server.url, cache_dir=tmp_path / "b", retry=ONE_TRY) as forge:
        commit = forge.commit({"x": b"x"}, parents=[], message="late", author=ASSAY_IDENTITY)
        began = time.monotonic()
        result = forge.push([RefUpdate("refs/heads/s0", commit, expected=None)])
        waited = time.monotonic() - began
    assert not result.ok and result.lost
    assert waited < WINDOW  # not a window's wait
    assert server.started["budgeted"] == 2
    assert server.started["throttled"] == 0
    assert len(server.budget.landed) == 2


def test_unlimited_by_default_and_a_running_server_reads_a_new_budget(
    forge_path: Path, tmp_path: Path
) -> None:
    with open_forge(str(forge_path)) as local:
        assert read_settings(local).pushes_per_minute == 0
    with ForgeServer(forge_path, budget_window=30.0) as server:
        assert server.budget.limit == 0
        assert push_many(server.url, tmp_path / "a", "refs/heads/u", 4) == [True] * 4
        assert server.started["throttled"] == server.started["budgeted"] == 0
        set_budget(forge_path, 5)  # the admin, through the filesystem, while it serves
        assert push_many(server.url, tmp_path / "b", "refs/heads/v", 1) == [True]
        assert server.budget.limit == 5
        # Every push that moved refs landed in the budget's log; those under it, counted.
        assert len(server.budget.landed) == 5
        assert server.started["budgeted"] == 1


def test_the_budget_is_one_field_of_the_settings_record(forge_path: Path) -> None:
    gate = key_for("budget").public
    with open_forge(str(forge_path)) as local:
        assert record_push_budget(local, 6) is True
        assert record_push_budget(local, 6) is False
        # Each writer of one field carries the others over.
        assert record_gate_key(local, gate, holdout="x25519:h") is True
        assert read_settings(local) == ForgeSettings(gate, "x25519:h", 6)
        assert record_push_budget(local, 0) is True
        after = read_settings(local)
    assert after == ForgeSettings(gate, "x25519:h", 0)
    assert read_local_settings(forge_path, local_settings_tip(forge_path)) == after


def test_a_malformed_budget_is_refused_on_write_and_on_read(forge_path: Path) -> None:
    with open_forge(str(forge_path)) as local:
        with pytest.raises(BadInput, match="--pushes-per-minute"):
            record_push_budget(local, -1)
        with pytest.raises(BadInput, match="pushes_per_minute"):
            write_settings(
                local, ForgeSettings(pushes_per_minute=True), author=ADMIN, message="bad"
            )
        # A record written past the writer's check is Corrupt for every reader, naming it.
        bad = {"v": 1, "kind": "forge-config", "pushes_per_minute": "six"}
        commit = local.commit(
            {"record.json": json.dumps(bad).encode()},
            parents=[],
            message="bad",
            author=ADMIN,
        )
        old = local.ls_refs("refs/assay/config").get("refs/assay/config")
        assert local.push([RefUpdate("refs/assay/config", commit, expected=old)]).ok
        with pytest.raises(Corrupt, match=r"refs/assay/config.*pushes_per_minute"):
            read_settings(local)
    with pytest.raises(Corrupt, match="pushes_per_minute"):
        ForgeServer(forge_path)  # the server does not start on a record it cannot read


def test_the_window_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WINDOW_ENV, "0.5")
    assert window_from_env() == 0.5
    for bad in ("soon", "0", "-3", "7200"):
        monkeypatch.setenv(WINDOW_ENV, bad)
        with pytest.raises(BadInput, match=WINDOW_ENV):
            window_from_env()


def test_the_cli_sets_and_shows_the_budget(run_assay: AssayRunner, tmp_path: Path) -> None:
    path = tmp_path / "f.git"
    made = run_assay("forge", "init", str(path), "--pushes-per-minute", "6", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["pushes_per_minute"] == 6
    shown = run_assay("forge", "settings", str(path))
    assert shown.returncode == 0, shown.stderr
    assert "push budget: 6 a minute" in shown.stdout
    unset = run_assay("forge", "settings", str(path), "--pushes-per-minute", "0", "--json")
    assert unset.returncode == 0, unset.stderr
    answer = json.loads(unset.stdout)
    assert (answer["changed"], answer["pushes_per_minute"]) == (True, 0)
    assert answer["gate_public_key"].startswith("ed25519:")
    refused = run_assay("forge", "settings", str(path), "--pushes-per-minute", "-2")
    assert refused.returncode != 0 and "--pushes-per-minute" in refused.stderr
    not_forge = run_assay("forge", "settings", str(tmp_path / "nowhere"))
    assert not_forge.returncode == 65 and "not a local embedded forge" in not_forge.stderr


def test_a_waited_push_that_receive_pack_takes_lands_too(
    forge_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pre-receive hook sends every push to git's receive-pack, whose answer then follows
    # the keep-alives the server already sent.
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ncat >/dev/null\necho checked by pre-receive\n")
    hook.chmod(0o755)
    monkeypatch.setenv("ASSAY_FORGE_STALL_SECONDS", STALL)
    set_budget(forge_path, 1)
    with ForgeServer(forge_path, budget_window=WINDOW) as server:
        assert push_many(server.url, tmp_path / "a", "refs/heads/r", 2) == [True, True]
        assert server.started["receive-pack"] == 2 and server.started["received"] == 0
        assert server.started["budgeted"] == 2 and server.started["throttled"] == 1
        landed = list(server.budget.landed)
    assert landed[1] - landed[0] >= WINDOW


def test_the_server_refuses_a_bad_window_setting(tmp_path: Path, forge_path: Path) -> None:
    from tests.conftest import popen_assay

    proc = popen_assay(
        ["forge", "serve", str(forge_path), "--port", "0"],
        cwd=tmp_path,
        env={WINDOW_ENV: "a minute"},
    )
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 65
    assert WINDOW_ENV in stderr


def test_waiting_pushes_go_first_come_first_served() -> None:
    from assay.forge.budget import PushBudget
    from tests.forge_fixtures import wait_until

    budget = PushBudget(1, window=30.0)
    order: list[str] = []
    release, holding = threading.Event(), threading.Event()

    def first() -> None:
        with budget.slot():
            holding.set()
            release.wait(timeout=30)  # in flight: the budget's one place is taken

    def later(name: str) -> None:
        with budget.slot() as slot:
            order.append(name)
            assert slot.throttled
            # Moved nothing: the place is given back, so the next in line goes at once.

    holder = threading.Thread(target=first)
    holder.start()
    assert holding.wait(timeout=30)
    threads = []
    for n, name in enumerate(("b", "c", "d"), start=1):
        thread = threading.Thread(target=later, args=(name,))
        thread.start()
        threads.append(thread)
        wait_until(lambda n=n: budget.waiting == n, what=f"{name} in line")
    release.set()
    for thread in (holder, *threads):
        thread.join(timeout=30)
    assert order == ["b", "c", "d"]
    assert list(budget.landed) == []  # nothing moved, nothing counted


def test_the_merge_budget_is_a_field_of_its_own(forge_path: Path, run_assay: AssayRunner) -> None:
    with open_forge(str(forge_path)) as local:
        assert local.merges_per_minute() == 0  # unlimited unless set
        assert record_push_budget(local, 6) is True
        assert record_merge_budget(local, 2) is True
        assert record_merge_budget(local, 2) is False
        assert read_settings(local) == ForgeSettings(None, "", 6, 2)
        assert local.merges_per_minute() == 2
        with pytest.raises(BadInput, match="--merges-per-minute"):
            record_merge_budget(local, -1)
    assert read_local_settings(forge_path, local_settings_tip(forge_path)).merges_per_minute == 2
    shown = run_assay("forge", "settings", str(forge_path))
    assert shown.returncode == 0, shown.stderr
    assert "merge budget: 2 a minute" in shown.stdout and "push budget: 6" in shown.stdout
    unset = run_assay("forge", "settings", str(forge_path), "--merges-per-minute", "0", "--json")
    answer = json.loads(unset.stdout)
    assert (answer["changed"], answer["merges_per_minute"], answer["pushes_per_minute"]) == (
        True,
        0,
        6,
    )
