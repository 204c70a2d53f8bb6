"""Desks: manifests (``desks/<name>.yaml``), the agent tools (``ToolBox``), and the loops.

The manifest and tool parts live in ``assay.desks.manifest`` and ``assay.desks.tools``; the
agent loop and desk loop build on them in their own modules.
"""

from __future__ import annotations

from assay.desks.manifest import DeskManifest, RunSpec, Takes, load_desks, parse_manifest
from assay.desks.tools import TOOL_NAMES, ToolBox, ToolError, ToolPolicy

__all__ = [
    "TOOL_NAMES",
    "DeskManifest",
    "RunSpec",
    "Takes",
    "ToolBox",
    "ToolError",
    "ToolPolicy",
    "load_desks",
    "parse_manifest",
]
