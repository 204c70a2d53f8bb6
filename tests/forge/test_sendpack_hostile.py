"""The in-process push against servers that lie: every answer that is not receive-pack's is
a typed error naming the forge, and no ref is ever reported ok that the server did not."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from assay.errors import Denied, ForgeUnavailable
from assay.forge import Forge, sendpack
from assay.forge.sendpack import NeedsGit
from assay.plumbing import ASSAY_IDENTITY, PushOutcome, RefUpdate, RetryPolicy
from tests.forge.test_lsrefs import Hostile, hostile, pkt
from tests.forge.test_stall import Silent

__all__ = ["hostile"]  # the fixture, shared with the ls-refs tests

RESULT = "application/x-git-receive-pack-result"
FAST = RetryPolicy(attempts=2, max_seconds=10, initial_wait=0.01, max_wait=0.02)
A, B = "refs/assay/claims/a", "refs/assay/claims/b"


def band(channel: int, payload: bytes) -> bytes:
    return pkt_bytes(bytes([channel]) + payload)


def pkt_bytes(payload: bytes) -> bytes:
    return f"{len(payload) + 4:04x}".encode() + payload


def report(*lines: str, unpack: str = "ok", errors: str = "") -> bytes:
    """A side-band-64k receive-pack answer: messages on 2, the report on 1, a flush."""
    inner = pkt(f"unpack {unpack}\n") + b"".join(pkt(line + "\n") for line in lines) + b"0000"
    return (band(2, errors.encode()) if errors else b"") + band(1, inner) + b"0000"


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A cache holding two commits to push (no forge needed to build them)."""
    forge = Forge("http://127.0.0.1:9/none.git", cache_dir=tmp_path / "cache")
    one = forge.commit({"f": b"1"}, parents=[], message="1", author=ASSAY_IDENTITY)
    two = forge.commit({"f": b"2"}, parents=[one], message="2", author=ASSAY_IDENTITY)
    forge.close()
    return tmp_path / "cache", one, two


def push_to(
    server_url: str, repo: tuple[Path, str, str], updates: list[RefUpdate], **config: str
) -> object:
    return sendpack.push(
        server_url,
        repo[0],
        updates,
        atomic=True,
        config=config,
        display_url=server_url,
        policy=FAST,
    )


def serve(hostile: Callable[..., Hostile], status: int, kind: str, body: bytes) -> Hostile:
    return hostile((500, "text/plain", b""), (status, kind, body))


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ((200, RESULT, report(f"ok {B}")), "other refs"),  # ok for a ref not sent
        ((200, RESULT, report(f"ok {A}", f"ok {B}")), "other refs"),  # and one invented
        ((200, RESULT, report()), "other refs"),  # the ref omitted
        ((200, RESULT, report(f"ok {A}", f"ok {A}")), "malformed status"),  # said twice
        ((200, RESULT, report(f"maybe {A}")), "malformed status"),
        # cut short after the report: retried (the push may have landed), never believed
        ((200, RESULT, report(f"ok {A}")[:-4]), "cut short"),
        ((200, RESULT, report(f"ok {A}")[:20]), "truncated"),
        ((200, RESULT, b"zzzz"), "malformed pkt-line"),
        ((200, RESULT, b"0000"), "no report"),
        ((200, RESULT, band(1, b"garbage") + b"0000"), "malformed"),
        ((200, RESULT, band(3, b"disk on fire\n") + b"0000"), "disk on fire"),
        ((200, RESULT, band(7, b"x") + b"0000"), "side-band channel 7"),
        ((200, "text/html", report(f"ok {A}")), "not a git forge"),
        ((200, RESULT, b"0008\x01xxx" * (sendpack.MAX_REPORT // 8 + 1)), "over"),
        ((404, RESULT, b""), "HTTP 404"),
    ],
)
def test_an_answer_that_is_not_receive_packs_is_unavailable_naming_the_forge(
    hostile: Callable[..., Hostile],
    repo: tuple[Path, str, str],
    answer: tuple[int, str, bytes],
    said: str,
) -> None:
    server = serve(hostile, *answer)
    with pytest.raises(ForgeUnavailable) as caught:
        push_to(server.url, repo, [RefUpdate(A, repo[1], expected=None)])
    assert said in caught.value.message
    assert server.url in caught.value.message
    assert caught.value.code == 69


def test_a_401_is_denied_naming_the_forge_and_the_token_variable(
    hostile: Callable[..., Hostile], repo: tuple[Path, str, str]
) -> None:
    server = serve(hostile, 401, RESULT, b"")
    with pytest.raises(Denied) as caught:
        push_to(server.url, repo, [RefUpdate(A, repo[1], expected=None)])
    assert server.url in caught.value.message
    assert "ASSAY_FORGE_TOKEN" in caught.value.message
    assert caught.value.code == 77


def test_the_request_is_one_post_of_cas_commands_capabilities_and_a_pack(
    hostile: Callable[..., Hostile], repo: tuple[Path, str, str]
) -> None:
    _, one, two = repo
    server = serve(hostile, 200, RESULT, report(f"ok {A}", f"ok {B}"))
    result = push_to(server.url, repo, [RefUpdate(A, two, expected=one), RefUpdate(B, one)])
    assert isinstance(result, sendpack.PushResult)
    assert result.refs == {A: PushOutcome.FAST_FORWARD, B: PushOutcome.CREATED}
    assert len(server.bodies) == 1  # no GET of the advertisement: one round trip
    assert server.headers[0]["Content-Type"] == "application/x-git-receive-pack-request"
    body = server.bodies[0]
    first_len = int(body[:4], 16)
    first = body[4:first_len]
    command, _, caps = first.partition(b"\0")
    assert command == f"{one} {two} {A}".encode()
    assert caps.split() == [
        b"report-status",
        b"atomic",
        b"side-band-64k",
        b"quiet",
        b"agent=assay/" + sendpack_version().encode(),
    ]
    rest = body[first_len:]
    second = pkt(f"{'0' * 40} {one} {B}\n")
    assert rest.startswith(second + b"0000PACK\0\0\0\2")
    # two is new (one is the lease's value, on the forge): its commit, tree and blob
    assert int.from_bytes(rest[len(second) + 12 : len(second) + 16], "big") == 3


def sendpack_version() -> str:
    from assay import __version__

    return __version__


def test_an_ok_inside_a_failed_atomic_push_is_not_believed(
    hostile: Callable[..., Hostile], repo: tuple[Path, str, str]
) -> None:
    _, one, two = repo
    lie = report(f"ok {A}", f"ng {B} atomic transaction failed")
    server = serve(hostile, 200, RESULT, lie)
    result = push_to(server.url, repo, [RefUpdate(A, two, expected=one), RefUpdate(B, one)])
    assert isinstance(result, sendpack.PushResult)
    assert not result.ok and result.refs[A] is PushOutcome.REJECTED


def test_an_answer_cut_after_its_report_is_asked_again_and_the_retry_decides(
    hostile: Callable[..., Hostile], repo: tuple[Path, str, str]
) -> None:
    # A server killed while its post-receive hook ran sent the report but no closing
    # flush. The push is not believed from that; the retry finds the ref at our value.
    _, one, two = repo
    lock = f"error: cannot lock ref '{A}': is at {two} but expected {one}\n"
    server = hostile(
        (200, RESULT, report(f"ok {A}")[:-4]),
        (200, RESULT, report(f"ng {A} failed to update ref", errors=lock)),
    )
    result = push_to(server.url, repo, [RefUpdate(A, two, expected=one)])
    assert isinstance(result, sendpack.PushResult)
    assert result.outcome is PushOutcome.UP_TO_DATE and result.ok


def test_refusals_read_as_git_reads_them(
    hostile: Callable[..., Hostile], repo: tuple[Path, str, str]
) -> None:
    _, one, two = repo
    other = "c" * 40
    cases = [
        (
            f"ng {A} failed to update ref",
            f"error: cannot lock ref '{A}': is at {other} but expected {one}\n",
            PushOutcome.STALE,
        ),
        (
            f"ng {A} failed to update ref",
            f"error: cannot lock ref '{A}': Unable to create '/x/{A}.lock': File exists.\n",
            PushOutcome.LOST_RACE,
        ),
        (f"ng {A} pre-receive hook declined", "", PushOutcome.REJECTED),
        # a message about another ref says nothing about this one
        (
            f"ng {A} failed to update ref",
            f"error: cannot lock ref '{B}': is at {two} but expected {one}\n",
            PushOutcome.LOST_RACE,
        ),
    ]
    for line, errors, outcome in cases:
        server = serve(hostile, 200, RESULT, report(line, errors=errors))
        result = push_to(server.url, repo, [RefUpdate(A, two, expected=one)])
        assert isinstance(result, sendpack.PushResult)
        assert result.outcome is outcome, (line, result)
        assert not result.ok and result.lost == (outcome is not PushOutcome.REJECTED)


def test_what_only_git_can_settle_is_handed_to_git(
    hostile: Callable[..., Hostile], repo: tuple[Path, str, str]
) -> None:
    _, one, two = repo
    for answer in (
        report(f"ng {A} missing necessary objects"),
        report(f"ng {A} unpacker error", unpack="index-pack abnormal exit"),
    ):
        server = serve(hostile, 200, RESULT, answer)
        with pytest.raises(NeedsGit):
            push_to(server.url, repo, [RefUpdate(A, two, expected=one)])
    # an unconditional update, a delete, another setting: git's push, not this one
    from assay.plumbing import UNCHECKED

    assert push_to("http://127.0.0.1:9/x", repo, [RefUpdate(A, two, expected=UNCHECKED)]) is None
    assert push_to("http://127.0.0.1:9/x", repo, [RefUpdate(A, None, expected=one)]) is None
    proxied = {"http.proxy": "http://127.0.0.1:9"}
    assert push_to("http://127.0.0.1:9/x", repo, [RefUpdate(A, two, one)], **proxied) is None


def test_a_server_error_is_retried_then_unavailable(
    hostile: Callable[..., Hostile], repo: tuple[Path, str, str]
) -> None:
    server = serve(hostile, 500, RESULT, b"")
    with pytest.raises(ForgeUnavailable) as caught:
        push_to(server.url, repo, [RefUpdate(A, repo[1], expected=None)])
    assert "after retries" in caught.value.message and "HTTP 500" in caught.value.message
    assert len(server.bodies) == FAST.attempts


def test_a_forge_that_hangs_is_given_up_on(
    repo: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_FORGE_STALL_SECONDS", "0.5")
    silent = Silent()
    try:
        url = f"http://127.0.0.1:{silent.port}/forge.git"
        with pytest.raises(ForgeUnavailable) as caught:
            push_to(url, repo, [RefUpdate(A, repo[1], expected=None)])
    finally:
        silent.close()
    assert "after retries" in caught.value.message and "ReadTimeout" in caught.value.message
    assert silent.accepted == FAST.attempts


def test_credentials_travel_in_headers_and_never_reach_a_message(
    hostile: Callable[..., Hostile], repo: tuple[Path, str, str]
) -> None:
    server = serve(hostile, 200, RESULT, band(3, b"no\n") + b"0000")
    secret = "Bearer c2VjcmV0LXRva2Vu"
    host = server.url.rsplit("/", 1)[0]
    shown = server.url.replace("http://", "http://user:hunter2@")
    with pytest.raises(ForgeUnavailable) as caught:
        sendpack.push(
            server.url,
            repo[0],
            [RefUpdate(A, repo[1], expected=None)],
            atomic=True,
            config={f"http.{host}/.extraHeader": f"Authorization: {secret}"},
            display_url=shown,
            policy=FAST,
        )
    assert server.headers[0]["Authorization"] == secret
    text = f"{caught.value.message} {caught.value.details}"
    assert "c2VjcmV0" not in text and "hunter2" not in text
    assert server.url in caught.value.message
    assert not any("c2VjcmV0" in value for value in os.environ.values())


def test_a_local_forge_that_is_not_there_is_unavailable(
    repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    url = f"file://{tmp_path}/nothing.git"
    with pytest.raises(ForgeUnavailable) as caught:
        push_to(url, repo, [RefUpdate(A, repo[1], expected=None)])
    assert "no repository" in caught.value.message and caught.value.code == 69
