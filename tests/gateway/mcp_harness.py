"""Serving an ASGI app with uvicorn on 127.0.0.1 (or a Unix socket) from a thread, talking
to the MCP server in it with the ``mcp`` library's own client, and ``CountingBridge``, a
real ``ToolBoxBridge`` that records what reached it."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from assay.desks.kinds.tools import ToolBox
from assay.gateway.mcp import McpApp, ToolBoxBridge

T = TypeVar("T")


@contextlib.contextmanager
def serve(app: ASGIApp, *, lifespan: str = "on", uds: str | None = None) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread; yield ``http://127.0.0.1:<port>`` (or, on the
    Unix socket ``uds``, ``http://localhost``)."""
    if uds is None:
        # proto=IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only
        # when the listening socket says it is TCP; without it every response that is
        # written in two parts waits ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(uds)
        base = "http://localhost"
    # Listening before the thread starts: a client that connects early waits in the backlog.
    sock.listen(64)
    config = uvicorn.Config(app, lifespan=lifespan, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"


@contextlib.contextmanager
def serve_in_gateway(mcp: McpApp, *, path: str = "/mcp", uds: str | None = None) -> Iterator[str]:
    """``mcp`` routed at ``path`` of a parent Starlette app whose lifespan enters
    ``mcp.lifespan()``, as the gateway runs it; yields the MCP endpoint's URL."""
    started = threading.Event()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with mcp.lifespan():
            started.set()
            yield

    parent = Starlette(routes=[Route(path, endpoint=mcp)], lifespan=lifespan)
    with serve(parent, uds=uds) as base:
        assert started.wait(30), "the gateway's lifespan did not start"
        yield base + path


def with_client(
    url: str,
    token: str | None,
    body: Callable[[Client], Awaitable[T]],
    *,
    mode: str = "legacy",
    uds: str | None = None,
) -> T:
    """Connect the library's client to ``url`` (bearer ``token``; over the Unix socket
    ``uds`` when given) and run ``body`` with it."""

    async def main() -> T:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        transport = httpx2.AsyncHTTPTransport(uds=uds) if uds else None
        async with httpx2.AsyncClient(headers=headers, timeout=60, transport=transport) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode=mode) as client:  # type: ignore[arg-type]
                return await body(client)

    return anyio.run(main)


def call(url: str, token: str, name: str, arguments: dict[str, Any], **kw: Any) -> Any:
    """One ``tools/call`` over a fresh connection; the ``CallToolResult``."""

    async def body(client: Client) -> Any:
        return await client.call_tool(name, arguments)

    return with_client(url, token, body, **kw)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


class CountingBridge(ToolBoxBridge):
    """A ToolBoxBridge that counts what reached it (the server's token check comes first)."""

    def __init__(self, toolbox: ToolBox, **kw: Any) -> None:
        super().__init__(toolbox, **kw)
        self.calls: list[str] = []
        self.listed = 0

    def list_tools(self) -> list[dict[str, Any]]:
        self.listed += 1
        return super().list_tools()

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(name)
        return super().call_tool(name, arguments)
