"""The board: collect what the forge shows about every brief, render it as Markdown and HTML.

``collect_board(forge, ...)`` builds a ``BoardState`` from main, the claim refs, the branch
journals and the evidence and review refs; ``render_markdown`` / ``render_html`` turn it into
``BOARD.md`` and one self-contained HTML page through ``board_templates/*.j2``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.board.model import BoardState, BriefRow, Session, Totals
from assay.forgestate.briefs import EvidenceCounts

if TYPE_CHECKING:
    from assay.board.render import render_html, render_markdown

__all__ = [
    "BoardState",
    "BriefRow",
    "EvidenceCounts",
    "Session",
    "Totals",
    "render_html",
    "render_markdown",
]


def __getattr__(name: str) -> Any:
    # The renderers (and Jinja2) load on first use: the desks read the forge through
    # ``assay.forgestate.source`` and must not pay for templates at start-up.
    if name in {"render_html", "render_markdown"}:
        from assay.board import render

        return getattr(render, name)
    raise AttributeError(f"module 'assay.board' has no attribute {name!r}")
