"""The MCP server over real HTTP on 127.0.0.1, driven by the ``mcp`` library's own client:
the token, refusals (undeclared tools, path escapes, commands off the allowlist, malformed
and oversized arguments, a bridge that crashes) first, then every tool working."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from assay.desks.kinds.tools import ToolBox, ToolPolicy
from assay.errors import Denied, Suspension
from assay.gateway.mcp import (
    build_mcp_app,
    check_arguments,
    desk_tool_descriptors,
)
from tests.gateway.mcp_harness import (
    CountingBridge,
    call,
    serve,
    serve_in_gateway,
    text_of,
    with_client,
)

TOKEN = "t0k-" + "9" * 40
ALL_TOOLS = frozenset({"read_file", "write_file", "list_files", "run", "finish"})
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "attacker", "version": "0"},
    },
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n", encoding="utf-8")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    return root


def make_bridge(tree: Path, **policy: Any) -> CountingBridge:
    options: dict[str, Any] = {"allowed": ALL_TOOLS, "run_prefixes": (("echo",), ("touch",))}
    options.update(policy)
    approvals: list[str] = []

    def approver(reason: str) -> dict[str, Any]:
        approvals.append(reason)
        return {"approved": True, "by": "ada"}

    bridge = CountingBridge(
        ToolBox(tree, ToolPolicy(**options)), approver=approver, messages=lambda: ["use tabs"]
    )
    bridge.approvals = approvals  # type: ignore[attr-defined]
    return bridge


@pytest.fixture
def bridge(tree: Path) -> CountingBridge:
    return make_bridge(tree)


@pytest.fixture
def url(bridge: CountingBridge) -> Iterator[str]:
    with serve_in_gateway(build_mcp_app(bridge, token=TOKEN)) as endpoint:
        yield endpoint


def post(url: str, body: Any, **headers: str) -> httpx.Response:
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx.post(url, content=json.dumps(body), headers={**base, **headers}, timeout=30)


# -- the token -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer wrong",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        f"bearer {TOKEN}",
        TOKEN,
        f"Basic {TOKEN}",
    ],
)
def test_a_request_without_the_token_is_401_and_reaches_nothing(
    url: str, bridge: CountingBridge, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    modern = {**headers, "MCP-Protocol-Version": "2026-07-28"}  # the library's other entry
    for body, sent_headers in [
        (INITIALIZE, headers),
        ({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers),
        ({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, modern),
    ]:
        response = post(url, body, **sent_headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in response.text
    call_run = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "pwned", "content": "x"}},
    }
    assert post(url, call_run, **headers).status_code == 401
    assert bridge.calls == [] and bridge.listed == 0


def test_the_library_client_with_a_wrong_token_fails_and_writes_nothing(
    url: str, tree: Path, bridge: CountingBridge
) -> None:
    with pytest.raises(Exception, match="unhandled errors"):
        call(url, "not-the-token", "write_file", {"path": "pwned", "content": "x"})
    assert not (tree / "pwned").exists()
    assert bridge.calls == []


def test_the_right_token_is_served(url: str) -> None:
    response = post(url, INITIALIZE, Authorization=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "assay"


def test_an_empty_token_is_refused_at_build_time(bridge: CountingBridge) -> None:
    with pytest.raises(ValueError, match="token"):
        build_mcp_app(bridge, token="")


def test_a_foreign_host_or_origin_is_refused(url: str, bridge: CountingBridge) -> None:
    # DNS rebinding: a page on evil.example resolving to 127.0.0.1 still names its own host.
    auth = f"Bearer {TOKEN}"
    assert post(url, INITIALIZE, Authorization=auth, Host="evil.example").status_code == 421
    assert (
        post(url, INITIALIZE, Authorization=auth, Origin="http://evil.example").status_code == 403
    )
    assert bridge.listed == 0


# -- refusals become tool errors -----------------------------------------------------------


def test_an_undeclared_tool_is_a_denied_tool_error(tree: Path) -> None:
    bridge = make_bridge(tree, allowed=frozenset({"read_file", "finish"}))
    with serve_in_gateway(build_mcp_app(bridge, token=TOKEN)) as url:
        for name, arguments in [
            ("run", {"command": "touch ran"}),
            ("write_file", {"path": "written", "content": "x"}),
            ("rm_rf", {}),
        ]:
            result = call(url, TOKEN, name, arguments)
            assert result.is_error
            assert text_of(result) == f"denied: tool {name!r} is not declared by this desk"
    assert not (tree / "ran").exists() and not (tree / "written").exists()


@pytest.mark.parametrize(
    "path",
    ["../escape.txt", "/tmp/absolute-escape.txt", "src/../../escape.txt", ".git/hooks/pre-commit"],
)
def test_a_path_escape_is_denied_and_writes_nothing(
    url: str, tree: Path, path: str, tmp_path: Path
) -> None:
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    result = call(url, TOKEN, "write_file", {"path": path, "content": "owned"})
    assert result.is_error
    assert text_of(result).startswith("denied: path ")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before
    assert not Path("/tmp/absolute-escape.txt").exists()


def test_a_symlink_out_of_the_tree_is_denied(url: str, tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s3cret", encoding="utf-8")
    os.symlink(outside, tree / "link")
    read = call(url, TOKEN, "read_file", {"path": "link/secret"})
    assert read.is_error and "s3cret" not in text_of(read)
    assert text_of(read).startswith("denied: ")
    write = call(url, TOKEN, "write_file", {"path": "link/new", "content": "x"})
    assert write.is_error and not (outside / "new").exists()


@pytest.mark.parametrize("command", ["rm -rf .", "sh -c 'touch ran'", "echoo hi", "./touch ran"])
def test_a_command_off_the_allowlist_is_denied(url: str, tree: Path, command: str) -> None:
    result = call(url, TOKEN, "run", {"command": command})
    assert result.is_error
    assert text_of(result).startswith("denied: command ")
    assert (tree / "src" / "app.py").exists() and not (tree / "ran").exists()


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("write_file", {"path": "a.txt"}, "'content' is a required property"),
        ("write_file", {"path": 7, "content": "x"}, "path: 7 is not of type 'string'"),
        ("write_file", {"path": "a.txt", "content": "x", "mode": "0777"}, "Additional properties"),
        ("run", {"command": ["touch", "ran"]}, "command: ['touch', 'ran'] is not of type"),
        ("finish", {"summary": "s", "evidence": [{"row": "r1", "result": "maybe"}]}, "result"),
        ("request_approval", {}, "'reason' is a required property"),
        ("check_messages", {"since": 3}, "Additional properties"),
    ],
)
def test_malformed_arguments_are_a_bad_input_tool_error(
    url: str, tree: Path, name: str, arguments: dict[str, Any], field: str
) -> None:
    result = call(url, TOKEN, name, arguments)
    assert result.is_error
    text = text_of(result)
    assert text.startswith(f"bad_input: {name}: ") and field in text, text
    assert not (tree / "a.txt").exists() and not (tree / "ran").exists()


def test_arguments_that_are_not_an_object_do_not_break_the_server(url: str) -> None:
    auth = f"Bearer {TOKEN}"
    bad = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "write_file", "arguments": ["path", "content"]},
    }
    response = post(url, bad, Authorization=auth, **{"MCP-Protocol-Version": "2025-06-18"})
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602  # invalid params, from the library
    garbage = httpx.post(url, content=b"{not json", headers={"Authorization": auth}, timeout=30)
    assert garbage.status_code == 400
    assert not call(url, TOKEN, "list_files", {}).is_error


def test_content_over_the_policy_limit_is_refused_and_not_written(tree: Path) -> None:
    bridge = make_bridge(tree, max_write_bytes=1000)
    with serve_in_gateway(build_mcp_app(bridge, token=TOKEN)) as url:
        result = call(url, TOKEN, "write_file", {"path": "big.txt", "content": "x" * 5000})
        assert result.is_error
        assert text_of(result) == "bad_input: write_file: content is over 1000 bytes"
    assert not (tree / "big.txt").exists()


def test_a_body_over_the_request_limit_is_413_and_the_server_keeps_serving(
    tree: Path, bridge: CountingBridge
) -> None:
    app = build_mcp_app(bridge, token=TOKEN, max_request_bytes=64 * 1024)
    with serve_in_gateway(app) as url:
        huge = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "write_file", "arguments": {"path": "h", "content": "y" * 100_000}},
        }
        response = post(url, huge, Authorization=f"Bearer {TOKEN}")
        assert response.status_code == 413
        with pytest.raises(Exception):  # noqa: B017 - the client's own error type for a 413
            call(url, TOKEN, "write_file", {"path": "h", "content": "y" * 100_000})
        assert not (tree / "h").exists() and bridge.calls == []
        assert not call(url, TOKEN, "write_file", {"path": "small", "content": "ok"}).is_error
    assert (tree / "small").read_text(encoding="utf-8") == "ok"


class ExplodingBridge(CountingBridge):
    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name == "run":
            raise RuntimeError("disk on fire at /home/ci/.netrc")
        if name == "list_files":
            return {"files": {object()}}  # not JSON: a bridge bug, not the model's
        if name == "request_approval":
            raise Suspension("approval:push")
        return super().call_tool(name, arguments)


def test_a_bridge_that_raises_is_an_internal_error_and_the_server_keeps_working(
    tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bridge = ExplodingBridge(ToolBox(tree, ToolPolicy(allowed=ALL_TOOLS)))
    with serve_in_gateway(build_mcp_app(bridge, token=TOKEN)) as url:
        with caplog.at_level(logging.ERROR, logger="assay.gateway.mcp"):
            result = call(url, TOKEN, "run", {"command": "echo hi"})
        assert result.is_error
        # The model sees that the tool failed, not the exception's text.
        assert text_of(result) == "internal: tool 'run' failed (RuntimeError); see the desk log"
        assert "netrc" not in text_of(result)
        assert "disk on fire" in caplog.text
        unjson = call(url, TOKEN, "list_files", {})
        assert unjson.is_error
        assert text_of(unjson) == "internal: tool 'list_files' failed (TypeError); see the desk log"
        suspended = call(url, TOKEN, "request_approval", {"reason": "push"})
        assert suspended.is_error
        assert text_of(suspended) == "suspended: waiting for approval:push"
        again = call(url, TOKEN, "write_file", {"path": "after.txt", "content": "fine"})
        assert not again.is_error
    assert (tree / "after.txt").read_text(encoding="utf-8") == "fine"


def test_denied_from_a_bridge_is_a_tool_error_too(tree: Path) -> None:
    class Refusing(CountingBridge):
        def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            raise Denied("budget says no")

    with serve_in_gateway(build_mcp_app(Refusing(ToolBox(tree, ToolPolicy())), token=TOKEN)) as u:
        result = call(u, TOKEN, "read_file", {"path": "src/app.py"})
    assert result.is_error and text_of(result) == "denied: budget says no"


# -- serving ------------------------------------------------------------------------------


def test_served_on_a_unix_socket_as_the_sandbox_relay_reaches_it(
    tree: Path, bridge: CountingBridge, tmp_path: Path
) -> None:
    socket_path = str(tmp_path / "gateway.sock")
    with serve_in_gateway(build_mcp_app(bridge, token=TOKEN), uds=socket_path) as url:
        result = call(
            url, TOKEN, "write_file", {"path": "via-uds", "content": "u"}, uds=socket_path
        )
        assert not result.is_error, text_of(result)
        refused = call(url, TOKEN, "read_file", {"path": "../x"}, uds=socket_path)
        assert refused.is_error and text_of(refused).startswith("denied: ")
        with pytest.raises(Exception, match="unhandled errors"):
            call(url, "wrong", "write_file", {"path": "pwned", "content": "x"}, uds=socket_path)
    assert (tree / "via-uds").read_text(encoding="utf-8") == "u"
    assert not (tree / "pwned").exists()


def test_a_get_is_405_at_once_rather_than_a_stream_held_open(url: str) -> None:
    headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {TOKEN}"}
    response = httpx.get(url, headers=headers, timeout=10)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST, DELETE"
    assert httpx.get(url, headers={"Accept": "text/event-stream"}, timeout=10).status_code == 401


def test_requests_before_the_lifespan_is_entered_get_503(bridge: CountingBridge) -> None:
    with serve(build_mcp_app(bridge, token=TOKEN), lifespan="off") as base:
        response = post(base + "/mcp", INITIALIZE, Authorization=f"Bearer {TOKEN}")
    assert response.status_code == 503
    assert bridge.listed == 0


def test_served_on_its_own_the_app_runs_its_own_lifespan(
    tree: Path, bridge: CountingBridge
) -> None:
    with serve(build_mcp_app(bridge, token=TOKEN)) as base:
        result = call(base + "/", TOKEN, "write_file", {"path": "alone.txt", "content": "1"})
    assert not result.is_error
    assert (tree / "alone.txt").read_text(encoding="utf-8") == "1"


def test_the_app_starts_only_once(bridge: CountingBridge) -> None:
    app = build_mcp_app(bridge, token=TOKEN)

    async def twice() -> None:
        async with app.lifespan():
            pass
        async with app.lifespan():
            pass

    with pytest.raises(RuntimeError, match="only be called once"):
        anyio.run(twice)


# -- the tools ----------------------------------------------------------------------------


def test_descriptors_are_the_toolbox_specs_plus_approval_and_steering(tree: Path) -> None:
    box = ToolBox(tree, ToolPolicy(allowed=ALL_TOOLS, run_prefixes=(("pytest",),)))
    descriptors = desk_tool_descriptors(box, approval=True, steering=True)
    assert [d["name"] for d in descriptors] == [
        *("read_file", "write_file", "list_files", "run", "finish"),
        *("request_approval", "check_messages"),
    ]
    for descriptor, spec in zip(descriptors, box.specs(), strict=False):
        assert descriptor["inputSchema"] == spec["function"]["parameters"]
        assert descriptor["description"] == spec["function"]["description"]
    assert "pytest" in descriptors[3]["description"]
    bare = desk_tool_descriptors(box.policy, approval=False, steering=False)
    assert [d["name"] for d in bare] == ["read_file", "write_file", "list_files", "run", "finish"]
    narrow = desk_tool_descriptors(
        ToolPolicy(allowed=frozenset({"read_file"})), approval=False, steering=True
    )
    assert [d["name"] for d in narrow] == ["read_file", "check_messages"]


def test_check_arguments_names_the_field() -> None:
    descriptor = desk_tool_descriptors(ToolPolicy(), approval=False, steering=False)[1]
    with pytest.raises(Exception, match=r"write_file: content: 3 is not of type 'string'"):
        check_arguments(descriptor, {"path": "a", "content": 3})
    check_arguments(descriptor, {"path": "a", "content": "ok"})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_tool_over_http(url: str, tree: Path, bridge: CountingBridge, mode: str) -> None:
    async def session(client: Client) -> dict[str, Any]:
        listed = await client.list_tools()
        results = {"tools": [(t.name, t.input_schema) for t in listed.tools]}
        script = [
            ("write_file", {"path": "notes/todo.md", "content": "ship it\n"}),
            ("read_file", {"path": "notes/todo.md"}),
            ("list_files", {}),
            ("run", {"command": "touch made-by-run"}),
            ("run", {"command": "echo hello"}),
            ("finish", {"summary": "done", "evidence": [{"row": "r1", "result": "pass"}]}),
            ("request_approval", {"reason": "push to main"}),
            ("check_messages", {}),
        ]
        for index, (name, arguments) in enumerate(script):
            result = await client.call_tool(name, arguments)
            assert not result.is_error, text_of(result)
            assert json.loads(text_of(result)) == result.structured_content
            results[f"{index}:{name}"] = result.structured_content
        return results

    results = with_client(url, TOKEN, session, mode=mode)
    expected = [d["name"] for d in bridge.list_tools()]
    assert [name for name, _ in results["tools"]] == expected
    assert dict(results["tools"])["write_file"]["required"] == ["path", "content"]
    assert results["0:write_file"] == {"path": "notes/todo.md", "bytes": 8}
    assert results["1:read_file"]["content"] == "ship it\n"
    assert results["2:list_files"]["files"] == ["notes/todo.md", "src/app.py"]
    assert (tree / "made-by-run").exists()
    assert results["4:run"]["exit"] == 0 and results["4:run"]["output"] == "hello\n"
    assert results["5:finish"] == {
        "finished": True,
        "summary": "done",
        "evidence": [{"row": "r1", "result": "pass", "note": ""}],
    }
    assert results["6:request_approval"] == {"approved": True, "by": "ada"}
    assert bridge.approvals == ["push to main"]  # type: ignore[attr-defined]
    assert results["7:check_messages"] == {"messages": ["use tabs"]}
    assert (tree / "notes" / "todo.md").read_text(encoding="utf-8") == "ship it\n"
    assert [key.split(":")[1] for key in results if key != "tools"] == bridge.calls
