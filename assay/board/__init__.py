"""The board: what the forge shows about every brief, rendered as Markdown and HTML.

The rows are the read model's (``assay.forgestate.rows.collect_board(forge, ...)`` judges a
``BoardState`` from one snapshot, as ``assay status`` and resync read it);
``render_markdown`` / ``render_html`` turn it into ``BOARD.md`` and one self-contained HTML
page through ``board_templates/*.j2``, and ``assay.board.runs`` draws a page per run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.forgestate.briefs import EvidenceCounts
from assay.forgestate.rows import BoardState, BriefRow, Session, Totals

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
