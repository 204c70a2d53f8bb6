"""Desks: manifests (``desks/<name>.yaml``), the agent tools (``ToolBox``), and the loops.

The manifest lives in ``assay.desks.manifests``, the tools and desk kinds in
``assay.desks.kinds``, the desk loop and its host in ``assay.desks.host``, and the desk
layer's forge records in ``assay.desks.records``.
"""

from __future__ import annotations

from assay.desks.kinds.tools import TOOL_NAMES, ToolBox, ToolError, ToolPolicy
from assay.desks.manifests.manifest import DeskManifest, RunSpec, Takes, load_desks, parse_manifest

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
