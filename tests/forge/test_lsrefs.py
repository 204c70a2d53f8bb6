"""The forge's refs read in process (``Forge.refresh``): hostile servers first, then the
real ones (git http-backend behind ``assay forge serve``, and a local forge via libgit2)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assay.errors import ForgeUnavailable
from assay.forge import Forge, open_forge
from assay.forge.lsrefs import (
    extra_headers,
    forget_servers,
    http_ls_refs,
    parse_pkt_lines,
    safe_url,
)
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.forge_fixtures import free_port, put_on_main, serve_http

ADV = "application/x-git-upload-pack-advertisement"
RES = "application/x-git-upload-pack-result"
SHA = "a" * 40


def pkt(text: str) -> bytes:
    return f"{len(text) + 4:04x}".encode() + text.encode()


V2_CAPS = pkt("version 2\n") + pkt("agent=git/2\n") + pkt("ls-refs=unborn\n") + b"0000"

Answer = tuple[int, str, bytes]


class Hostile:
    """An HTTP server on 127.0.0.1 answering GET info/refs and POST git-upload-pack as told;
    it keeps every request's headers."""

    def __init__(self, get: Answer, post: Answer = (200, RES, b"0000")) -> None:
        self.answers = {"GET": get, "POST": post}
        self.headers: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                outer.headers.append(dict(self.headers.items()))
                length = int(self.headers.get("Content-Length") or 0)
                outer.bodies.append(self.rfile.read(length))
                status, kind, body = outer.answers[method]
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/forge.git"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile() -> Iterator[Callable[..., Hostile]]:
    made: list[Hostile] = []
    forget_servers()  # a port the system reuses must not look like a known v2 forge

    def make(get: Answer, post: Answer = (200, RES, b"0000")) -> Hostile:
        made.append(Hostile(get, post))
        return made[-1]

    yield make
    for server in made:
        server.close()


def ask(url: str, headers: dict[str, str] | None = None) -> dict[str, str]:
    return http_ls_refs(url, ["refs/"], headers=headers or {}, display_url=url)


# ---------------------------------------------------------------------------- hostile


@pytest.mark.parametrize(
    ("get", "post", "said"),
    [
        ((500, ADV, b""), (200, RES, b"0000"), "HTTP 500"),
        ((200, "text/html", b"hello"), (200, RES, b"0000"), "not a git forge"),
        ((200, ADV, V2_CAPS), (404, RES, b""), "HTTP 404"),
        ((200, ADV, V2_CAPS), (200, "text/plain", b"0000"), "not a git forge"),
        ((200, ADV, b"zzzz"), (200, RES, b"0000"), "malformed pkt-line"),
        ((200, ADV, V2_CAPS), (200, RES, pkt(f"{SHA} refs/heads/main\n")), "without a flush"),
        ((200, ADV, V2_CAPS), (200, RES, b"00ff" + b"x" * 20), "truncated"),
        ((200, ADV, V2_CAPS), (200, RES, b"0003" + b"0000"), "malformed"),
        ((200, ADV, V2_CAPS), (200, RES, pkt("not-a-sha refs/heads/main\n") + b"0000"), "ref"),
        ((200, ADV, V2_CAPS), (200, RES, pkt(f"{SHA} refs/../x\n") + b"0000"), "ref line"),
        ((200, ADV, V2_CAPS), (200, RES, b"0001" + b"0000"), "unexpected packet"),
        ((200, ADV, pkt("version 2\n") + pkt("fetch\n") + b"0000"), (200, RES, b""), "ls-refs"),
    ],
)
def test_a_server_that_does_not_answer_as_git_is_a_typed_error_naming_the_forge(
    hostile: Callable[..., Hostile], get: Answer, post: Answer, said: str
) -> None:
    server = hostile(get, post)
    with pytest.raises(ForgeUnavailable) as caught:
        ask(server.url)
    assert server.url in caught.value.message
    assert said in caught.value.message
    assert caught.value.code == 69


def test_refresh_against_a_hostile_server_fails_typed_and_leaves_the_cache_alone(
    hostile: Callable[..., Hostile], tmp_path: Path
) -> None:
    server = hostile((200, ADV, V2_CAPS), (200, RES, pkt(f"{SHA} refs/heads/main\n")))
    with open_forge(server.url, cache_dir=tmp_path / "cache") as forge:
        with pytest.raises(ForgeUnavailable, match="without a flush"):
            forge.refresh(["refs/heads/"])
        assert not list((tmp_path / "cache" / "refs").rglob("main"))


def test_the_request_is_git_protocol_v2_ls_refs_with_ref_prefixes(
    hostile: Callable[..., Hostile],
) -> None:
    answer = pkt(f"{SHA} refs/assay/claims/b1\n") + pkt(f"{'b' * 40} refs/other\n") + b"0000"
    server = hostile((200, ADV, pkt("# service=git-upload-pack\n") + b"0000" + V2_CAPS))
    server.answers["POST"] = (200, RES, answer)
    found = http_ls_refs(server.url, ["refs/assay/claims/"], headers={}, display_url=server.url)
    assert found == {"refs/assay/claims/b1": SHA}  # what the server over-answered is dropped
    assert all(h.get("Git-Protocol") == "version=2" for h in server.headers)
    assert server.bodies[1] == (
        pkt("command=ls-refs\n") + b"0001" + pkt("ref-prefix refs/assay/claims/\n") + b"0000"
    )
    # the advertisement is read once: later asks are one round trip (the POST alone)
    http_ls_refs(server.url, ["refs/assay/claims/"], headers={}, display_url=server.url)
    assert len(server.headers) == 3 and server.bodies[2] == server.bodies[1]


def test_a_version_0_server_is_read_from_its_advertisement(
    hostile: Callable[..., Hostile],
) -> None:
    advert = (
        pkt("# service=git-upload-pack\n")
        + b"0000"
        + pkt(f"{SHA} HEAD\0multi_ack side-band-64k\n")
        + pkt(f"{SHA} refs/heads/main\n")
        + b"0000"
    )
    server = hostile((200, ADV, advert))
    assert ask(server.url) == {"refs/heads/main": SHA}
    assert len(server.headers) == 1  # no second round trip


def test_credentials_go_in_headers_and_never_into_a_message(
    hostile: Callable[..., Hostile], tmp_path: Path
) -> None:
    server = hostile((500, ADV, b""))
    secret = "Basic c2VjcmV0LXRva2Vu"
    host = server.url.rsplit("/", 1)[0]
    config = {f"http.{host}/.extraHeader": f"Authorization: {secret}"}
    forge = Forge(server.url, cache_dir=tmp_path / "cache", config=config)
    with forge, pytest.raises(ForgeUnavailable) as caught:
        forge.refresh(["refs/"])
    assert server.headers[0]["Authorization"] == secret
    assert secret not in caught.value.message and "c2VjcmV0" not in str(caught.value.details)
    assert "secret" not in safe_url("http://user:secret@127.0.0.1:1/x")


def test_a_header_scoped_to_another_host_is_not_sent_and_unknown_settings_defer_to_git() -> None:
    url = "http://127.0.0.1:9/forge.git"
    assert extra_headers(url, {"http.http://elsewhere/.extraHeader": "A: b"}) == {}
    assert extra_headers(url, {"http.extraHeader": "A: b"}) == {"A": "b"}
    assert extra_headers(url, {"http.proxy": "http://proxy"}) is None
    assert extra_headers(url, {"credential.helper": "store"}) is None


def test_an_unreachable_forge_is_asked_by_git_with_its_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One retry is a retry: the default five waited out 3 s of backoff to say the same.
    monkeypatch.setenv("ASSAY_FORGE_RETRIES", "2")
    url = f"http://127.0.0.1:{free_port()}/forge.git"
    forge = open_forge(url, cache_dir=tmp_path / "cache")
    with forge, pytest.raises(ForgeUnavailable):  # git's own answer, as before
        forge.refresh(["refs/heads/"])


def test_pkt_lines_parse_flush_delim_and_payloads() -> None:
    assert parse_pkt_lines(pkt("a\n") + b"0001" + pkt("b\n") + b"0000", display_url="u") == [
        b"a\n",
        None,
        b"b\n",
        None,
    ]


# ---------------------------------------------------------------------------- real servers


def _no_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """From here on, starting any git process fails (an empty PATH)."""
    empty = tmp_path / "no-git"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))


@pytest.mark.parametrize("transport", ["file", "http"])
def test_refresh_starts_no_git_when_nothing_moved_and_fetches_what_did(
    transport: str, forge_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = serve_http(forge_path) if transport == "http" else None
    url = served.url if served else f"file://{forge_path}"
    try:
        with open_forge(url, cache_dir=tmp_path / "a") as reader:
            first = reader.refresh(["refs/heads/", "refs/assay/claims/"])
            assert first == reader.fetch(["refs/heads/", "refs/assay/claims/"])
            with monkeypatch.context() as patched:
                _no_git(patched, tmp_path)
                assert reader.refresh(["refs/heads/", "refs/assay/claims/"]) == first
                # a second handle on the same cache maps the tips without a fetch
                with open_forge(url, cache_dir=tmp_path / "a") as peer:
                    assert peer.refresh(["refs/heads/main"]) == {
                        "refs/heads/main": first["refs/heads/main"]
                    }
            moved = put_on_main(forge_path, {"briefs/new.md": b"# new\n"})
            with open_forge(url, cache_dir=tmp_path / "b") as writer:
                claim = writer.commit(
                    {"claim.json": b"{}"}, parents=[], message="c", author=ASSAY_IDENTITY
                )
                assert writer.push([RefUpdate("refs/assay/claims/x", claim, expected=None)]).ok
            after = reader.refresh(["refs/heads/", "refs/assay/claims/"])
            assert after == {"refs/heads/main": moved, "refs/assay/claims/x": claim}
            assert reader.read_blob(moved, "briefs/new.md") == b"# new\n"
            assert reader.read_blob(claim, "claim.json") == b"{}"
            with open_forge(url, cache_dir=tmp_path / "b") as writer:
                writer.refresh(["refs/assay/claims/x"])
                assert writer.push([RefUpdate("refs/assay/claims/x", None, expected=claim)]).ok
            with monkeypatch.context() as patched:
                _no_git(patched, tmp_path)  # a deleted ref needs no objects: no fetch either
                assert reader.refresh(["refs/assay/claims/"]) == {}
    finally:
        if served:
            served.stop()
