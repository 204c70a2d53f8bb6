"""Pieces of the fake GitHub shared by its modules: replies, errors, the HTTP handler.

The handler reads one request (including git's chunked uploads) and hands it to the fake:
git smart HTTP under ``/<owner>/<repo>.git/``, GraphQL at ``/api/graphql``, REST under
``/api/v3``. ``FakeGitHub`` lives in ``fake_github``; pull requests in ``fake_pulls``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

API_PREFIX = "/api/v3"
GRAPHQL_PATH = "/api/graphql"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class HttpError(Exception):
    def __init__(self, status: int, message: str, **headers: str) -> None:
        super().__init__(message)
        self.reply = Reply(
            status,
            {"message": message, "documentation_url": "https://docs.github.com/rest"},
            dict(headers),
        )


def git_identity() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GIT_AUTHOR_NAME="fake-github",
        GIT_AUTHOR_EMAIL="fake@github.invalid",
        GIT_COMMITTER_NAME="fake-github",
        GIT_COMMITTER_EMAIL="fake@github.invalid",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
    )
    return env


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in two writes: with Nagle's algorithm on, the body
    # waited for the client's delayed ACK of the headers, 40 ms on every keep-alive reply.
    disable_nagle_algorithm = True
    server_fake: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the fake's ``calls`` list is the log."""

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self) -> None:
        fake = self.server_fake
        url = urlsplit(self.path)
        raw = self._body()
        headers = {key.lower(): value for key, value in self.headers.items()}
        git_root = f"/{fake.owner}/{fake.repo}.git"
        if url.path.startswith(git_root + "/"):
            status, out, body = fake.handle_git(self.command, url.path, url.query, headers, raw)
        elif url.path == "/_fake/rules" and self.command == "POST":  # fake_rules.RULES_PATH
            status, out, body = fake.handle_rules(raw)
        elif url.path == GRAPHQL_PATH:
            status, out, body = fake.handle_graphql(headers, raw)
        elif url.path.startswith(API_PREFIX + "/"):
            query = parse_qsl(url.query, keep_blank_values=True)
            path = url.path[len(API_PREFIX) :]
            status, out, body = fake.handle_api(self.command, path, query, headers, raw)
        else:
            status, out, body = 404, {}, b"not found\n"
        self.send_response(status)
        for key, value in out.items():
            if key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve
