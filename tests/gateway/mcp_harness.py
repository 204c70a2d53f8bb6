"""Serving an ASGI app with uvicorn on 127.0.0.1 from a thread, and talking to the MCP
server in it with the ``mcp`` library's own client."""

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

from assay.gateway.mcp import McpApp

T = TypeVar("T")


@contextlib.contextmanager
def serve(app: ASGIApp, *, lifespan: str = "on") -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread; yield ``http://127.0.0.1:<port>``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    # Listening before the thread starts: a client that connects early waits in the backlog.
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan=lifespan, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"


@contextlib.contextmanager
def serve_in_gateway(mcp: McpApp, *, path: str = "/mcp") -> Iterator[str]:
    """``mcp`` routed at ``path`` of a parent Starlette app whose lifespan enters
    ``mcp.lifespan()``, as the gateway runs it; yields the MCP endpoint's URL."""
    started = threading.Event()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with mcp.lifespan():
            started.set()
            yield

    parent = Starlette(routes=[Route(path, endpoint=mcp)], lifespan=lifespan)
    with serve(parent) as base:
        assert started.wait(30), "the gateway's lifespan did not start"
        yield base + path


def with_client(
    url: str,
    token: str | None,
    body: Callable[[Client], Awaitable[T]],
    *,
    mode: str = "legacy",
) -> T:
    """Connect the library's client to ``url`` (bearer ``token``) and run ``body`` with it."""

    async def main() -> T:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
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
