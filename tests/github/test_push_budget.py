"""GitHub's push budget: the fake refuses a push over 6 a window, and the client keeps to it.

Every push of a ``GitHubForge`` goes through the host's ledger (``assay.forge.pushledger``):
it waits for room rather than be refused, and a push the forge refused anyway (another host
pushed) backs off and is sent again, the same compare-and-swap, so nothing is lost and a
lost race stays lost. The window is the conftest's ``TEST_WINDOW_S``, read by the fake and
the client from one setting.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.errors import ForgeUnavailable
from assay.forge import Identity, open_forge
from assay.forge.budget import WINDOW_ENV
from assay.forge.pushledger import PushLedger
from assay.github.forge import PUSHES_PER_MINUTE, GitHubForge
from assay.plumbing import PushOutcome, PushResult, PushThrottled, RefUpdate
from tests.github.fake_github import PUSH_THROTTLED, TEST_WINDOW_S, FakeGitHub, Limits

AUTHOR = Identity("tester", "tester@example.invalid")
WINDOW = float(TEST_WINDOW_S)


@pytest.fixture
def github_env(fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITHUB_API_URL", fake_github.api_url)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs-bot")
    monkeypatch.setenv("ASSAY_GITHUB_WRITE_SPACING", "0")
    monkeypatch.delenv("ASSAY_GITHUB_GIT_URL", raising=False)
    monkeypatch.delenv("ASSAY_GITHUB_TOKEN_ENV", raising=False)
    fake_github.seed_main({"README.md": "widgets\n"})


def github_forge(cache: Path) -> GitHubForge:
    """A forge on the fake whose cache (and so whose push ledger) is ``cache``: another
    cache is another host."""
    opened = open_forge("github:acme/widgets", cache_dir=cache)
    assert isinstance(opened, GitHubForge)
    return opened


@pytest.fixture
def forge(github_env: None, tmp_path: Path) -> Iterator[GitHubForge]:
    with github_forge(tmp_path / "host-a") as opened:
        yield opened


def create(forge: GitHubForge, ref: str, text: str = "x") -> PushOutcome:
    commit = forge.commit({"f": text.encode()}, parents=[], message=text, author=AUTHOR)
    return forge.push([RefUpdate(ref, commit, expected=None)]).outcome


def another_host_spends_the_window(fake: FakeGitHub) -> None:
    """Pushes this host's ledger cannot know of fill the fake's window (made in process,
    within a millisecond: well inside any window)."""
    with fake.lock:
        at, window = fake.clock(), fake.limits.push_window_s
        room = PUSHES_PER_MINUTE - sum(at - t < window for t in fake.pushes)
        for _ in range(room):
            assert fake._push_budget("another-host", "/acme/widgets.git/git-receive-pack") is None


def test_the_fake_refuses_a_push_over_the_budget_by_default(tmp_path: Path) -> None:
    now = [1000.0]
    fake = FakeGitHub(tmp_path / "gh", clock=lambda: now[0])  # its push path, not started
    assert fake.limits.pushes_per_minute == PUSHES_PER_MINUTE == 6
    assert fake.limits.push_window_s == WINDOW  # the conftest's setting, read once
    admitted = [fake._push_budget("bot", "/p") for _ in range(6)]
    refused = fake._push_budget("bot", "/p")
    assert admitted == [None] * 6 and refused is not None
    status, headers, body = refused
    assert status == 429 and body.decode().startswith(PUSH_THROTTLED)
    assert headers["Retry-After"] == "1"  # whole seconds, at least one
    assert (len(fake.pushes), len(fake.throttled_pushes)) == (6, 1)  # refused: not counted
    now[0] += WINDOW
    assert fake._push_budget("bot", "/p") is None
    assert fake.most_pushes_in_window() == 6


def test_a_forge_waits_for_room_and_is_never_refused(
    fake_github: FakeGitHub, forge: GitHubForge, caplog: pytest.LogCaptureFixture
) -> None:
    # A window longer than six pushes take on a loaded machine, for both sides alike.
    fake_github.limits.push_window_s = forge.push_ledger.window = window = 1.5
    pushes = PUSHES_PER_MINUTE + 2
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="assay.forge.pushledger"):
        outcomes = [create(forge, f"refs/assay/t/{n}") for n in range(pushes)]
    assert outcomes == [PushOutcome.CREATED] * pushes
    assert fake_github.throttled_pushes == []  # it kept to the budget: GitHub never had to say
    assert len(fake_github.pushes) == pushes and fake_github.most_pushes_in_window() <= 6
    assert time.monotonic() - started >= window  # the seventh waited for the first to age
    assert forge.push_ledger.stats.waits >= 1
    assert "waiting" in caplog.text and "github:acme/widgets" in caplog.text
    ledger = json.loads(forge.push_ledger.path.read_text())
    assert ledger["v"] == 1 and 1 <= len(ledger["pushes"]) <= 6


def test_a_throttled_push_backs_off_and_lands(fake_github: FakeGitHub, forge: GitHubForge) -> None:
    another_host_spends_the_window(fake_github)
    assert create(forge, "refs/assay/a/0") is PushOutcome.CREATED
    assert len(fake_github.throttled_pushes) == 1  # refused once, then sent again
    assert forge.push_ledger.stats.throttled == 1 and forge.push_ledger.stats.pushes == 2
    assert fake_github.ref("refs/assay/a/0") is not None
    assert fake_github.most_pushes_in_window() <= 6


def test_a_push_git_makes_is_throttled_and_sent_again_too(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    ref = "refs/assay/t/gone"
    assert create(forge, ref) is PushOutcome.CREATED
    tip = fake_github.ref(ref)
    another_host_spends_the_window(fake_github)
    # A delete is git's push (assay.forge.sendpack leaves it to git): git's words for the
    # 429 are read as a throttled push, backed off and sent again.
    result = forge.push([RefUpdate(ref, None, expected=tip)])
    assert result.outcome is PushOutcome.DELETED and fake_github.ref(ref) is None
    # git does not show Retry-After: each refusal backs off one push's share of the window
    # (0.5 s / 6) until the window has room.
    assert forge.push_ledger.stats.throttled == len(fake_github.throttled_pushes) >= 1
    assert fake_github.most_pushes_in_window() <= 6


def test_a_retried_push_that_lost_its_race_is_still_lost(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    ref = "refs/assay/claims/race"
    assert create(forge, ref, "first") is PushOutcome.CREATED
    before = fake_github.ref(ref)
    assert before is not None
    mine = forge.commit({"f": b"mine"}, parents=[before], message="mine", author=AUTHOR)
    theirs = fake_github._git(
        "commit-tree", fake_github._git("rev-parse", f"{before}^{{tree}}"), "-p", before, "-m", "t"
    )
    sleep = forge.push_ledger.sleep

    def another_writer_moves_it(seconds: float) -> None:
        # While this push backs off, another writer moves the ref it leased.
        fake_github._git("update-ref", ref, theirs, before)
        sleep(seconds)

    forge.push_ledger.sleep = another_writer_moves_it
    another_host_spends_the_window(fake_github)
    result = forge.push([RefUpdate(ref, mine, expected=before)])
    assert forge.push_ledger.stats.throttled == 1
    assert result.lost and fake_github.ref(ref) == theirs  # their write stands


def test_a_throttle_without_retry_after_backs_off_one_share_of_the_window(
    tmp_path: Path,
) -> None:
    clock = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    ledger = PushLedger(
        tmp_path / "ledger.json",
        limit=6,
        window=60.0,
        name="github:o/r",
        max_wait_s=300,
        clock=lambda: clock[0],
        sleep=sleep,
    )
    answers = iter([PushThrottled("429"), "landed"])

    def send() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert ledger(send) == "landed"
    assert slept == [10.0]  # 60 s / 6: one push's share, then sent again
    assert (ledger.stats.pushes, ledger.stats.throttled) == (2, 1)


def test_the_ledger_judges_a_dead_pushers_push_and_gives_up_in_time(tmp_path: Path) -> None:
    clock = [1000.0]
    path = tmp_path / "ledger.json"

    def ledger(max_wait_s: float = 300.0) -> PushLedger:
        return PushLedger(
            path,
            limit=2,
            window=60.0,
            name="github:o/r",
            max_wait_s=max_wait_s,
            clock=lambda: clock[0],
            sleep=lambda s: clock.__setitem__(0, clock[0] + s),
        )

    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    # One push under way by a process that is gone, one by this one, still under way.
    path.write_text(
        json.dumps(
            {
                "v": 1,
                "pushes": [
                    {"id": "gone", "at": 990.0, "pid": dead},
                    {"id": "mine", "at": 999.0, "pid": os.getpid()},
                ],
                "until": 0,
            }
        )
    )
    with pytest.raises(ForgeUnavailable, match=r"push budget .* had no room"):
        ledger(max_wait_s=10)(lambda: "never")
    # The gone process's push counts as landed when it started: room at 990 + 60.
    done = ledger()(lambda: "sent")
    assert done == "sent" and clock[0] == pytest.approx(1050.0)
    path.write_text("{not json")  # an unreadable ledger is started afresh
    assert ledger()(lambda: "again") == "again"
    assert json.loads(path.read_text())["v"] == 1


def test_a_lifted_budget_lets_a_test_push_freely(tmp_path: Path) -> None:
    fake = FakeGitHub(tmp_path / "gh", limits=Limits(pushes_per_minute=None))
    assert all(fake._push_budget("bot", "/p") is None for _ in range(20))
    assert fake.throttled_pushes == [] and len(fake.pushes) == 20


def test_the_window_setting_is_the_embedded_forges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WINDOW_ENV, "7.5")
    assert Limits().push_window_s == 7.5


def test_rest_and_push_waits_share_one_total_cap(
    fake_github: FakeGitHub, github_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command waits out a rate limit, then a refused push: each wait alone is under the
    command's cap (``ASSAY_GITHUB_MAX_TOTAL_WAIT``), the two together are not, so it stops
    with exit 69 and nothing pushed rather than outlast its job."""
    monkeypatch.setenv("ASSAY_GITHUB_MAX_TOTAL_WAIT", "1.5")
    with github_forge(tmp_path / "capped") as forge:
        fake_github.inject(429, retry_after=1, method="GET", path_contains="/issues")
        assert forge.api.open_issues("assay") == []
        assert forge.rest.stats.retries == 1
        fake_github.throttle_next_pushes(1)  # refused with Retry-After: 1
        pushes = len(fake_github.pushes)
        with pytest.raises(ForgeUnavailable, match="in all") as raised:
            create(forge, "refs/heads/capped")
        assert "push to github:acme/widgets" in raised.value.message
        assert len(fake_github.pushes) == pushes and fake_github.ref("refs/heads/capped") is None
        assert forge.rest.waited_in_all_s <= 1.5


def test_merge_budget_waits_share_the_same_total_cap(
    fake_github: FakeGitHub, github_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge waiting for the merge budget (one a window on GitHub) is counted against the
    command's one cap too: after a rate-limit wait, the second merge of a window would take
    the command past it, so it is exit 69 before it waits, and nothing is pushed."""
    monkeypatch.setenv("ASSAY_GITHUB_MAX_TOTAL_WAIT", "1.2")
    with github_forge(tmp_path / "merging") as forge:
        fake_github.inject(429, retry_after=1, method="GET", path_contains="/issues")
        assert forge.api.open_issues("assay") == []
        assert forge.merges_per_minute() == 1
        assert forge.merge_gate(lambda: forge.push([new_ref(forge, "refs/heads/m1")])).ok
        sent: list[RefUpdate] = []

        def second() -> PushResult:
            sent.append(new_ref(forge, "refs/heads/m2"))
            return forge.push(sent)

        with pytest.raises(ForgeUnavailable, match="in all") as raised:
            forge.merge_gate(second)
        assert "merge to github:acme/widgets" in raised.value.message
        assert sent == [] and fake_github.ref("refs/heads/m2") is None
        assert forge.rest.waited_in_all_s <= 1.2
        ledger = forge.merge_ledger
        assert ledger is not None and ledger.stats.waited_s == 0


def new_ref(forge: GitHubForge, ref: str) -> RefUpdate:
    commit = forge.commit({"f": ref.encode()}, parents=[], message=ref, author=AUTHOR)
    return RefUpdate(ref, commit, expected=None)
