"""A tiny MCP server over streamable HTTP on 127.0.0.1 (the ``mcp`` package's ``MCPServer``
under uvicorn, in a thread), to check that a profile registers an MCP server with its CLI:
one tool, ``note(text)``, that records what it was given and answers ``noted: <text>``."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer


class McpEcho:
    """``with McpEcho() as mcp: mcp.url`` (``http://127.0.0.1:P/mcp``); ``notes`` lists the
    texts the tool got, ``authorizations`` the Authorization headers of the requests."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.authorizations: list[str] = []
        server = MCPServer("assay-test", log_level="ERROR")

        @server.tool()
        def note(text: str) -> str:
            """Record a note and say so."""
            self.notes.append(text)
            return f"noted: {text}"

        app = server.streamable_http_app(stateless_http=True, json_response=True)
        self._app = app
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(self._asgi, log_level="error", lifespan="on", interface="asgi3")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            self.authorizations.append(headers.get(b"authorization", b"").decode())
        await self._app(scope, receive, send)

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._sock]))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"

    def __enter__(self) -> McpEcho:
        self._thread.start()
        while not self._server.started:  # uvicorn sets it once it accepts connections
            if not self._thread.is_alive():
                raise RuntimeError("the MCP server did not start")
            self._thread.join(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()
