"""Assay's MCP server: the desk's declared tools, served to agent CLIs over streamable HTTP.

An agent CLI (Claude Code, Codex) registers this server and calls the desk's tools through
it; each call goes to a ``ToolBridge``, which decides what the call does (the gateway's
bridge journals it as a ``run.tool`` step; ``ToolBoxBridge`` calls a ``ToolBox`` directly).
The protocol is the ``mcp`` library's (low-level ``Server`` and its streamable-HTTP session
manager, stateless, JSON responses); this module adds the bearer-token check, the tool
descriptors and the mapping of Assay's refusals to MCP tool errors. The library is imported
by ``build_mcp_app`` only: a desk whose CLI takes no MCP server never loads it.

Running it inside the gateway::

    mcp = build_mcp_app(bridge, token=token)      # one per run: it starts only once
    app = Starlette(routes=[Route("/mcp", endpoint=mcp), ...],
                    lifespan=lambda _app: mcp.lifespan())

The library's session manager needs a task group, which ``mcp.lifespan()`` opens and
closes; Starlette does not run a mounted app's own lifespan, so the parent app must enter
it (inside an existing lifespan: ``async with mcp.lifespan(): ...``). Until it is entered,
and after it is left, requests get 503; while it runs, a GET (an event stream) gets 405. Served on
its own (uvicorn given ``mcp`` as the app), the app answers ASGI lifespan events by
entering ``lifespan()`` itself. The app serves whatever path it is routed at; prefer
``Route("/mcp", ...)`` to ``Mount("/mcp", ...)``, which answers ``/mcp`` with a 307 to
``/mcp/`` that not every client follows. A pre-bound TCP socket handed to uvicorn must be
made with ``IPPROTO_TCP`` (see docs/mcp.md) or each response waits ~40 ms on Nagle.

Every request must carry ``Authorization: Bearer <token>`` (compared in constant time) or
it gets 401 before the library sees it. Tool calls are served one at a time in a worker
thread, so a journaling bridge sees one sequence and the event loop never blocks on a
command. Refusals never become transport failures: ``Denied``, ``ToolError`` and any other
``AssayError`` come back as ``isError`` results whose text starts with the error's status
word (``denied: ...``, ``bad_input: ...``), a ``Suspension`` as ``suspended: waiting for
...``; an unexpected exception in a bridge (or a result that is not JSON) is logged and
answered ``internal: ...`` without its message, and the server keeps serving.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from assay import __version__
from assay.desks.kinds.tools import ToolBox, ToolError, ToolPolicy, tool_specs
from assay.errors import AssayError, Denied, Suspension

log = logging.getLogger(__name__)

SERVER_NAME = "assay"
"""The name the server gives itself; CLIs prefix its tools with it (``mcp__assay__run``)."""

# Large enough for a write_file at ToolPolicy's default limit (4 MB) after JSON escaping;
# anything bigger is answered 413 by the library before it is parsed.
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024

# Host headers a loopback server accepts (DNS-rebinding protection of the library); the
# Unix-socket relay of the sandbox forwards requests with one of these.
LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]")


class ToolBridge(Protocol):
    """What the MCP server calls: the desk's tool list, and one tool call at a time."""

    def list_tools(self) -> list[dict[str, Any]]:
        """MCP tool descriptors: ``name``, ``description``, ``inputSchema``."""
        ...

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The JSON-ready result of tool ``name``; ``Denied`` or ``ToolError`` to refuse."""
        ...


# -- descriptors -------------------------------------------------------------------------

REQUEST_APPROVAL: dict[str, Any] = {
    "name": "request_approval",
    "description": (
        "Ask a person to approve what you are about to do. The run waits until they answer; "
        "the answer is this tool's result."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "description": "What needs approving, and why."}
        },
        "required": ["reason"],
        "additionalProperties": False,
    },
}

CHECK_MESSAGES: dict[str, Any] = {
    "name": "check_messages",
    "description": "The messages a person has sent to this run so far (steering), oldest first.",
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
}


def desk_tool_descriptors(
    policy_or_toolbox: ToolPolicy | ToolBox, *, approval: bool, steering: bool
) -> list[dict[str, Any]]:
    """MCP descriptors of the desk's declared ToolBox tools, then the approval and steering
    tools when the desk has them. The ToolBox's own function specs are the source."""
    policy = (
        policy_or_toolbox.policy if isinstance(policy_or_toolbox, ToolBox) else policy_or_toolbox
    )
    descriptors = [
        {
            "name": spec["function"]["name"],
            "description": spec["function"]["description"],
            "inputSchema": spec["function"]["parameters"],
        }
        for spec in tool_specs(policy)
    ]
    if approval:
        descriptors.append(REQUEST_APPROVAL)
    if steering:
        descriptors.append(CHECK_MESSAGES)
    return descriptors


def check_arguments(descriptor: dict[str, Any], arguments: dict[str, Any]) -> None:
    """``ToolError`` naming the tool and the field when ``arguments`` break the schema."""
    import jsonschema  # on the first tool call, not at every desk's start

    validator = jsonschema.Draft202012Validator(descriptor["inputSchema"])
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        raise ToolError(f"{descriptor['name']}: {where}: {error.message}", tool=descriptor["name"])


class ToolBoxBridge(ToolBridge):
    """A bridge that runs a real ``ToolBox`` directly, journaling nothing.

    ``approver`` (given a reason, returns the answer) adds ``request_approval``;
    ``messages`` (returns the steering text delivered so far) adds ``check_messages``.
    Arguments are checked against the descriptors before anything runs.
    """

    def __init__(
        self,
        toolbox: ToolBox,
        *,
        approver: Callable[[str], dict[str, Any]] | None = None,
        messages: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        self.toolbox = toolbox
        self.approver = approver
        self.messages = messages

    def list_tools(self) -> list[dict[str, Any]]:
        return desk_tool_descriptors(
            self.toolbox, approval=self.approver is not None, steering=self.messages is not None
        )

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        descriptor = next((d for d in self.list_tools() if d["name"] == name), None)
        if descriptor is None:
            raise Denied(f"tool {name!r} is not declared by this desk", tool=name)
        check_arguments(descriptor, arguments)
        if name == "request_approval" and self.approver is not None:
            return self.approver(arguments["reason"])
        if name == "check_messages" and self.messages is not None:
            return {"messages": list(self.messages())}
        result: dict[str, Any] = self.toolbox.call(name, arguments)
        return result


# -- the server --------------------------------------------------------------------------


def _text_result(text: str, *, error: bool, structured: Any = None) -> types.CallToolResult:
    import mcp_types as types

    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured, is_error=error
    )


def _mcp_server(bridge: ToolBridge) -> Server[Any]:
    import mcp_types as types
    from mcp.server import Server

    serial = anyio.Lock()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        descriptors = await anyio.to_thread.run_sync(bridge.list_tools)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=d["name"], description=d.get("description"), input_schema=d["inputSchema"]
                )
                for d in descriptors
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        async with serial:
            try:
                result = await anyio.to_thread.run_sync(bridge.call_tool, params.name, arguments)
                # Keys sorted, in the text and the structured copy: a replayed result comes
                # back from the journal in canonical order, and the CLI must read the same
                # result live and replayed (or its next model call differs: a divergence).
                text = json.dumps(result, ensure_ascii=False, sort_keys=True)
                result = json.loads(text)
            except AssayError as exc:
                return _text_result(f"{exc.status}: {exc.message}", error=True)
            except Suspension as exc:
                # The bridge's run is suspending (an approval, say): the desk ends the CLI;
                # the protocol and the server carry on meanwhile.
                return _text_result(f"suspended: waiting for {exc.waiting_for}", error=True)
            except Exception as exc:
                log.exception("MCP tool %r failed", params.name)
                text = (
                    f"internal: tool {params.name!r} failed ({type(exc).__name__}); "
                    "see the desk log"
                )
                return _text_result(text, error=True)
        structured = result if isinstance(result, dict) else None
        return _text_result(text, error=False, structured=structured)

    return Server(
        SERVER_NAME, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool
    )


class McpApp:
    """The ASGI app of ``build_mcp_app``: checks the token, then hands to the library."""

    def __init__(self, manager: StreamableHTTPSessionManager, token: str) -> None:
        self._manager = manager
        self._expected = f"Bearer {token}".encode()
        self._running = False

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the library's session manager; serve requests only while inside (once)."""
        async with self._manager.run():
            self._running = True
            try:
                yield
            finally:
                self._running = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)

    def _refusal(self, scope: Scope) -> JSONResponse | None:
        """The answer to a request the MCP library must not see, or None to pass it on."""
        presented = dict(scope["headers"]).get(b"authorization", b"")
        if not hmac.compare_digest(presented, self._expected):
            return JSONResponse(
                {"error": "a valid bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="assay"'},
            )
        if not self._running:
            return JSONResponse({"error": "the MCP server is not running"}, 503)
        if scope["method"] == "GET":
            # A stateless server never speaks first, and the library would hold a GET's
            # event stream open until the client goes: 405 says there is none (the spec's
            # answer), and nothing keeps the gateway from stopping.
            return JSONResponse(
                {"error": "this server offers no event stream"},
                status_code=405,
                headers={"Allow": "POST, DELETE"},
            )
        return None

    async def _serve_lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        async with self.lifespan():
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})


def build_mcp_app(
    bridge: ToolBridge,
    *,
    token: str,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
) -> McpApp:
    """The streamable-HTTP MCP app serving ``bridge``'s tools to holders of ``token``."""
    if not token:
        raise ValueError("build_mcp_app needs a non-empty token")
    # The library is imported here, by the first app built, and by nothing else: its
    # import is half of a desk process's start-up (docs/benchmarks.md, "Agent-CLI desk").
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{host}:*" for host in allowed_hosts] + list(allowed_hosts),
        allowed_origins=[f"http://{host}:*" for host in allowed_hosts],
    )
    manager = StreamableHTTPSessionManager(
        app=_mcp_server(bridge),
        json_response=True,
        stateless=True,
        security_settings=security,
        max_request_body_size=max_request_bytes,
    )
    return McpApp(manager, token)
