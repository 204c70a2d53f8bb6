"""The board: collect what the forge shows about every brief, render it as Markdown and HTML.

``collect_board(forge, ...)`` builds a ``BoardState`` from main, the claim refs, the branch
journals and the evidence and review refs; ``render_markdown`` / ``render_html`` turn it into
``BOARD.md`` and one self-contained HTML page through ``board_templates/*.j2``.
"""

from __future__ import annotations

from assay.board.model import BoardState, BriefRow, EvidenceCounts, Session, Totals
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
