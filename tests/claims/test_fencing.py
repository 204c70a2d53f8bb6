"""Fencing with real processes: a paused zombie, and a forge that goes down mid-run.

The holder is ``tests/claims/holder.py``: it claims a brief, journals steps with the real
``JournalWriter`` and pushes each step as one commit through ``BranchSync``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from assay.branch import journal_path
from assay.claims import ClaimStore
from assay.forge import open_forge
from assay.journal import read_journal
from tests.conftest import assay_env
from tests.forge_fixtures import Served, clone, wait_until

BRIEF = "b1"
BRANCH = f"refs/heads/assay/{BRIEF}"
JOURNAL = f"refs/assay/journal/{BRIEF}"


def _holder(
    url: str,
    tmp: Path,
    name: str,
    *,
    steps: int,
    pace: float,
    lease: float,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[str], Path]:
    status = tmp / f"{name}.status.json"
    argv = [
        sys.executable,
        "-m",
        "tests.claims.holder",
        "--forge",
        url,
        "--brief",
        BRIEF,
        "--desk",
        name,
        "--workdir",
        str(tmp / f"{name}-work"),
        "--status",
        str(status),
        "--steps",
        str(steps),
        "--pace",
        str(pace),
        "--lease",
        str(lease),
    ]
    proc = subprocess.Popen(
        argv,
        cwd=tmp,
        env=assay_env({"ASSAY_CLAIM_SKEW": "0", **(env or {})}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return proc, status


def _status(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _remote_journal(url: str, dest: Path) -> tuple[list[dict[str, Any]], Path]:
    work = clone(url, dest)
    # The checkpoints (work tree and journal) live on the brief's journal ref.
    for args in (["fetch", "--quiet", "origin", JOURNAL], ["checkout", "--quiet", "FETCH_HEAD"]):
        subprocess.run(["git", *args], cwd=work, check=True, timeout=30)
    return read_journal(work / journal_path(BRIEF)).entries, work


def _tip(url: str) -> str | None:
    with open_forge(url) as forge:
        return forge.ls_refs("refs/heads/assay/").get(BRANCH)


def test_a_woken_zombie_is_fenced_and_the_new_holder_is_intact(
    http_forge: Served, tmp_path: Path
) -> None:
    url = http_forge.url
    zombie, zombie_status = _holder(url, tmp_path, "zombie", steps=10_000, pace=0.05, lease=2)
    try:
        wait_until(lambda: _status(zombie_status).get("pushed", 0) >= 3, what="zombie steps")
        os.killpg(zombie.pid, signal.SIGSTOP)  # the whole process group, git children too
        paused_at = _status(zombie_status)
        with open_forge(url) as forge:
            store = ClaimStore(forge, skew_s=0)

            def expired() -> bool:
                record = store.get(BRIEF)
                return record is not None and store.status(record) == "expired"

            wait_until(expired, timeout=30, what="the zombie's lease to expire")
        heir, heir_status = _holder(url, tmp_path, "heir", steps=3, pace=0, lease=30)
        _, err = heir.communicate(timeout=120)
        assert heir.returncode == 0, err
        heir_final = _status(heir_status)
        assert heir_final["fence"] == 2 and heir_final["done"]
        assert _tip(url) == heir_final["tip"]
    finally:
        os.killpg(zombie.pid, signal.SIGCONT)
    _, zombie_err = zombie.communicate(timeout=120)
    assert zombie.returncode == 4, zombie_err
    assert "fenced" in zombie_err
    # The zombie wrote nothing after it woke: the branch is exactly where the heir left it.
    assert _tip(url) == heir_final["tip"]
    entries, work = _remote_journal(url, tmp_path / "check")
    kinds = [e["kind"] for e in entries]
    takeover = kinds.index("takeover")
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert takeover >= paused_at["pushed"] + 1
    assert all(e["fence"] == 1 for e in entries[:takeover])
    after = entries[takeover:]
    assert all(e["fence"] == 2 for e in after), "an entry of the zombie's fence after takeover"
    zombie_holder = paused_at["holder"]
    assert not any(e.get("out", {}).get("value", {}).get("holder") == zombie_holder for e in after)
    assert sorted(p.name for p in (work / "work").iterdir() if p.name.startswith("heir")) == [
        "heir-2-1.txt",
        "heir-2-2.txt",
        "heir-2-3.txt",
    ]
    with open_forge(url) as forge:
        record = ClaimStore(forge).get(BRIEF)
    assert record is not None and (record.fence, record.state) == (2, "released")


def test_forge_down_mid_run_exits_69_then_the_run_resumes_from_the_forge(
    http_forge: Served, tmp_path: Path
) -> None:
    url = http_forge.url
    retry_env = {"ASSAY_FORGE_RETRIES": "3", "ASSAY_FORGE_RETRY_SECONDS": "3"}
    first, first_status = _holder(
        url, tmp_path, "first", steps=10_000, pace=0.05, lease=3, env=retry_env
    )
    wait_until(lambda: _status(first_status).get("pushed", 0) >= 2, what="first steps")
    http_forge.stop()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 69, err
    assert "retrying" in err and "unreachable" in err
    last = _status(first_status)
    http_forge.start()
    # Nothing half-written: the forge holds exactly the last acknowledged step.
    assert _tip(url) == last["tip"]
    with open_forge(url) as forge:
        refs = forge.ls_refs("refs/")
        store = ClaimStore(forge, skew_s=0)
        record = store.get(BRIEF)
        assert record is not None and (record.fence, record.state) == (1, "held")
        assert set(refs) == {"refs/heads/main", BRANCH, JOURNAL, f"refs/assay/claims/{BRIEF}"}

        def claimable() -> bool:
            current = store.get(BRIEF)
            return current is not None and store.status(current) == "expired"

        wait_until(claimable, timeout=30, what="the dead holder's lease to expire")
    again, again_status = _holder(url, tmp_path, "again", steps=2, pace=0, lease=30)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    entries, _ = _remote_journal(url, tmp_path / "check")
    kinds = [e["kind"] for e in entries]
    pushed = last["pushed"]
    # start, the first holder's acknowledged steps, then the resumed run on top of them.
    assert kinds == ["start"] + ["step"] * pushed + ["takeover", "step", "step", "end"]
    assert entries[pushed + 1]["prev"] == last["head"]
    assert _status(again_status)["fence"] == 2
