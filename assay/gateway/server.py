"""The gateway's HTTP side: a starlette app served by uvicorn in a background thread.

It listens on 127.0.0.1 (an ephemeral port, ``Gateway.url``) and on a Unix socket
(``Gateway.socket_path``, which the sandbox relays to inside its network namespace).
Every request must present the run's random token as its API key (``x-api-key`` or
``Authorization: Bearer``), else 401. A model call is parsed, handed to the run thread
as a ``ModelCall`` through ``Gateway.calls`` and answered with whatever the run thread
decides (recorded, forwarded, refused); nothing here journals or calls the upstream.
The MCP app, when given, is served at ``/mcp`` with its own lifespan entered here.

A request body is bounded (``max_body_bytes``, 32 MiB by default) while it is read: a
declared ``Content-Length`` over the bound is refused with 413 before any of it is read,
and a chunked body is refused the moment its bytes pass the bound, so a client cannot make
the gateway hold more than the bound of one request in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import queue
import secrets
import socket
import stat
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from assay.errors import Internal
from assay.gateway.apis import WireApi, get_api, no_route, resolve
from assay.gateway.upstream import PASS_HEADERS, Reply

MAX_BODY_BYTES = 32 * 1024 * 1024
UNROUTED_KEPT = 20  # the refused routes a gateway remembers for the desk's error


@dataclass
class ModelCall:
    """One model request waiting for the run thread's answer."""

    api: str  # a name of assay.gateway.apis.API_NAMES
    route: str
    body: dict[str, Any]
    headers: dict[str, str]
    _loop: asyncio.AbstractEventLoop = field(repr=False)
    _future: asyncio.Future[Reply] = field(repr=False)

    @property
    def wire(self) -> WireApi:
        return get_api(self.api)

    @property
    def stream(self) -> bool:
        """Whether the answer streams: the route's say (Gemini), else the body's."""
        return self.wire.streams(self.route, self.body)

    def answer(self, reply: Reply) -> None:
        """Send ``reply`` to the CLI (from any thread; a gone client is ignored)."""

        def settle() -> None:
            if not self._future.done():
                self._future.set_result(reply)

        with contextlib.suppress(RuntimeError):  # the loop has closed: the gateway stopped
            self._loop.call_soon_threadsafe(settle)

    def refuse(self, status: int, kind: str, message: str) -> None:
        """Answer with an error body in the call's own API shape."""
        data = json.dumps(self.wire.error_body(kind, message, status)).encode()
        self.answer(Reply(status, "application/json", data, False))


class _TooLarge(Exception):
    """A request body passed the gateway's bound while it was being read."""


class _BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes, declared or counted as it arrives.

    The count is taken in ``receive``, so no reader (the model routes' ``request.body()``,
    the MCP app) ever gets more than ``limit`` bytes; when the limit is passed the request's
    reader is unwound and the 413 is sent unless a response has already started.
    """

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, send)
            return
        seen = 0
        started = False

        async def counted() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        async def tracked(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if not started:
                await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        api = resolve(scope.get("path", "")) or get_api("openai-chat")
        message = f"the request body is over the gateway's limit of {self.limit} bytes"
        response = error_response(api, 413, "request_too_large", message)
        response.headers["connection"] = "close"
        await response(scope, _nothing, send)


async def _nothing() -> Any:
    return {"type": "http.disconnect"}


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def error_response(api: WireApi, status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse(api.error_body(kind, message, status), status_code=status)


def presented_token(request: Request, api: WireApi) -> str:
    """The key in the first of the API's key headers the request has (``authorization``
    only as ``Bearer``)."""
    for name in api.auth_headers:
        value = request.headers.get(name)
        if not value:
            continue
        if name == "authorization":
            return value[7:] if value[:7].lower() == "bearer " else ""
        return value
    return ""


SOCKET_NAME = "gateway.sock"
FOLDER_PREFIX = "assay-gw-"  # each gateway's socket folder, in the temporary folder
DEAD_AFTER_S = 60.0  # a folder younger than this may belong to a gateway still starting


def remove_dead_gateway_folders(root: Path | None = None) -> list[Path]:
    """Remove the socket folders that gateways killed outright (SIGKILL) left behind.

    Only this user's folders, older than ``DEAD_AFTER_S``, holding nothing but a socket
    that no process serves, are removed (a live gateway's socket accepts a connection).
    The socket lives in the temporary folder because a socket's path is limited to 108
    bytes; without this, every killed run leaves one folder there for good.
    """
    where = Path(tempfile.gettempdir()) if root is None else root
    removed: list[Path] = []
    try:
        candidates = [p for p in where.iterdir() if p.name.startswith(FOLDER_PREFIX)]
    except OSError:
        return removed
    now = time.time()
    for folder in candidates:
        try:
            info = folder.lstat()
            if (
                not stat.S_ISDIR(info.st_mode)
                or info.st_uid != os.getuid()
                or now - info.st_mtime < DEAD_AFTER_S
                or not set(os.listdir(folder)) <= {SOCKET_NAME}
                or _served(folder / SOCKET_NAME)
            ):
                continue
            with contextlib.suppress(FileNotFoundError):
                (folder / SOCKET_NAME).unlink()
            folder.rmdir()
        except OSError:
            continue  # another process's folder, or one removed meanwhile: not ours to judge
        removed.append(folder)
    return removed


def _served(path: Path) -> bool:
    """Whether a process accepts connections on the socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)  # a full backlog would block a connect: then it is alive
    try:
        probe.connect(os.fspath(path))
    except (FileNotFoundError, ConnectionRefusedError):
        return False
    except OSError:
        return True  # cannot tell: leave it
    finally:
        probe.close()
    return True


class Gateway:
    """The loopback server of one run; start it, read ``calls``, ``stop()`` it."""

    def __init__(
        self,
        *,
        token: str | None = None,
        mcp_app: ASGIApp | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        on_unrouted: Callable[[str], None] | None = None,
    ) -> None:
        self.token = token or secrets.token_urlsafe(32)
        # What a CLI asked for that no route serves: each message once, for the desk's log.
        self.unrouted: list[str] = []
        self.on_unrouted = on_unrouted
        self.max_body_bytes = max_body_bytes
        self.calls: queue.Queue[ModelCall] = queue.Queue()
        self.mcp_app = mcp_app
        remove_dead_gateway_folders()
        self._dir = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        self.socket_path = self._dir / SOCKET_NAME
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sockets: list[socket.socket] = []
        self.port = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the base URL a CLI is pointed at."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str | None:
        return f"{self.url}/mcp" if self.mcp_app is not None else None

    # ----------------------------------------------------------------- life cycle

    def start(self) -> Gateway:
        # proto IPPROTO_TCP (not 0) so asyncio sets TCP_NODELAY on accepted connections:
        # without it a response's body waits for the client's delayed ACK (~40 ms a call).
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tcp.bind(("127.0.0.1", 0))
        self.port = int(tcp.getsockname()[1])
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        self._sockets = [tcp, unix]
        config = uvicorn.Config(
            self.app(),
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=1,
            h11_max_incomplete_event_size=MAX_BODY_BYTES,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=self._sockets)),  # type: ignore[union-attr]
            name="assay-gateway",
            daemon=True,
        )
        self._thread.start()
        if not self._started():
            self.stop()
            raise Internal("the model gateway did not start")
        return self

    def _started(self) -> bool:
        assert self._server is not None and self._thread is not None
        while self._thread.is_alive() and not self._server.started:
            self._thread.join(0.005)
        return bool(self._server.started)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        for sock in self._sockets:
            sock.close()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()
            self._dir.rmdir()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------- the app

    def app(self) -> Starlette:
        routes = []
        if self.mcp_app is not None:
            routes.append(
                Route("/mcp", _asgi(self._guarded_mcp), methods=["GET", "POST", "DELETE"])
            )
        routes.append(
            Route(
                "/{path:path}",
                self._dispatch,
                methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
            )
        )
        return Starlette(
            routes=routes,
            lifespan=self._lifespan,
            middleware=[Middleware(_BodyLimit, limit=self.max_body_bytes)],
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        enter = getattr(self.mcp_app, "lifespan", None)
        if callable(enter):
            async with enter():
                yield
        else:
            yield

    async def _guarded_mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.mcp_app is not None
        await self.mcp_app(scope, receive, send)

    async def _dispatch(self, request: Request) -> Response:
        """A model call on a route of a registered API; anything else is unrouted."""
        api = resolve(request.url.path) if request.method == "POST" else None
        if api is None:
            return await self._unrouted(request)
        return await self._model_call(request, api)

    async def _unrouted(self, request: Request) -> Response:
        """A route no API here serves: 404 with a message naming the API the path belongs
        to (the CLI shows it); a POST's is remembered and passed to ``on_unrouted`` (the
        desk logs it).
        Answered before the token is checked: a CLI speaking another API sends its key in
        a header this gateway does not read, and the 404 says nothing a route list would
        not."""
        api, message = no_route(request.method, request.url.path)
        # Only a POST is a model call that went nowhere: a CLI's probes (Claude Code's
        # HEAD /, a GET of /v1/models) are answered but are not the desk's business.
        if (
            request.method == "POST"
            and message not in self.unrouted
            and len(self.unrouted) < UNROUTED_KEPT
        ):
            self.unrouted.append(message)
            if self.on_unrouted is not None:
                self.on_unrouted(message)
        return error_response(api or get_api("openai-chat"), 404, "not_found_error", message)

    async def _model_call(self, request: Request, api: WireApi) -> Response:
        route = request.url.path
        presented = presented_token(request, api).encode()
        if not hmac.compare_digest(presented, self.token.encode()):
            return error_response(api, 401, "authentication_error", "invalid API key")
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return error_response(api, 400, "invalid_request_error", "the body is not JSON")
        if not isinstance(body, dict):
            return error_response(
                api, 400, "invalid_request_error", "the body must be a JSON object"
            )
        headers = {n: request.headers[n] for n in PASS_HEADERS if n in request.headers}
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reply] = loop.create_future()
        self.calls.put(ModelCall(api.name, route, body, headers, loop, future))
        reply = await future
        if reply.stream:
            return StreamingResponse(
                _chunks(reply.body), status_code=reply.status, media_type=reply.content_type
            )
        return Response(reply.body, status_code=reply.status, media_type=reply.content_type)


def _asgi(app: Callable[[Scope, Receive, Send], Any]) -> Any:
    """Let a Route call a raw ASGI callable (starlette treats functions as endpoints)."""

    class Wrapped:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await app(scope, receive, send)

    return Wrapped()


def _chunks(body: bytes) -> Iterator[bytes]:
    """A recorded event stream sent event by event, byte for byte."""
    start = 0
    while start < len(body):
        end = body.find(b"\n\n", start)
        end = len(body) if end < 0 else end + 2
        yield body[start:end]
        start = end


__all__ = ["Gateway", "ModelCall"]
