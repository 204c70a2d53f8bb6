"""Assay's MCP tools under the names each CLI gives them, and nothing else passing as one."""

from __future__ import annotations

import pytest

from assay.gateway.calls import tool_allowed

MCP_TOOLS = ("finish", "request_approval")


@pytest.mark.parametrize(
    "name",
    [
        "mcp__assay__finish",
        "mcp_assay_finish",
        "assay__finish",
        "assay_finish",
        "assay.finish",
    ],
)
def test_each_clis_name_for_an_mcp_tool_is_that_tool(name: str) -> None:
    assert tool_allowed(name, ["Bash"], MCP_TOOLS)


@pytest.mark.parametrize(
    "name",
    ["finish", "assay_Bash2", "mcp__other__finish", "assay_", "xassay_finish", "assay_finishx"],
)
def test_a_name_that_is_no_declared_or_mcp_tool_is_refused(name: str) -> None:
    assert not tool_allowed(name, ["Bash"], MCP_TOOLS)
