"""Rendering a ``BoardState`` through the ``board_templates/*.j2`` templates.

Rendering is a pure function of the state and the templates: no clock, no environment, no
dictionary-order surprises (rows arrive sorted from ``BoardState.groups``), so the same forge
state gives the same bytes. Templates come from ``--templates DIR`` when given, else the
``board_templates/`` folder of main on the forge (passed in as a mapping by the collector),
else the ones this checkout ships.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from assay.board import chart
from assay.board.model import BoardState
from assay.console import printable
from assay.errors import BadInput
from assay.forgestate.times import duration, iso

MARKDOWN_TEMPLATE = "board.md.j2"
HTML_TEMPLATE = "board.html.j2"

SHIPPED_TEMPLATES = Path(__file__).resolve().parents[2] / "board_templates"


def when(moment: datetime | None) -> str:
    return "-" if moment is None else iso(moment)


def money(usd: float) -> str:
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"


def number(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def calls(model_calls: int, repeated: int = 0) -> str:
    """Model calls, and the requests sent upstream again (``12 +1 repeated``): a provider
    bills each request, so the call in flight at a kill is counted as paid twice."""
    return number(model_calls) + (f" +{number(repeated)} repeated" if repeated else "")


def md_cell(value: Any) -> str:
    """Text safe inside one Markdown table cell: no pipes, no line breaks, no HTML."""
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    for bad, good in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;")):
        text = text.replace(bad, good)
    return text or "-"


def _shown(value: Any) -> Any:
    """Every ``{{ }}`` of every template, shipped or from main, passes through here: brief
    titles, notes and ids reach BOARD.md and the HTML page with their control and bidi
    characters escaped (``printable``), so a viewer shows them instead of acting on them."""
    if isinstance(value, Markup):
        return Markup(printable(str(value), keep="\n\t"))
    if isinstance(value, str):
        return printable(value)
    return value


def _environment(
    templates: Path | None, main_templates: Mapping[str, str] | None
) -> jinja2.Environment:
    loaders: list[jinja2.BaseLoader] = []
    if templates is not None:
        if not templates.is_dir():
            raise BadInput(f"--templates: {templates} is not a directory")
        loaders.append(jinja2.FileSystemLoader(str(templates)))
    if main_templates:
        loaders.append(jinja2.DictLoader(dict(main_templates)))
    if SHIPPED_TEMPLATES.is_dir():
        loaders.append(jinja2.FileSystemLoader(str(SHIPPED_TEMPLATES)))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2", "html")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
    )
    env.filters.update(
        duration=duration, when=when, money=money, number=number, md=md_cell, calls=calls
    )
    return env


def _context(state: BoardState) -> dict[str, Any]:
    return {
        "board": state,
        "as_of": iso(state.as_of),
        "groups": state.groups(),
        "totals": state.totals(),
    }


def _render(
    name: str,
    state: BoardState,
    templates: Path | None,
    main_templates: Mapping[str, str] | None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    env = _environment(templates, main_templates)
    try:
        template = env.get_template(name)
    except jinja2.TemplateNotFound as missing:
        where = templates if templates is not None else SHIPPED_TEMPLATES
        raise BadInput(f"--templates: no template {name} in {where}") from missing
    try:
        return template.render(**_context(state), **(extra or {}))
    except jinja2.TemplateError as broken:
        raise BadInput(f"{name}: the template failed to render: {broken}") from broken


def render_markdown(
    state: BoardState,
    *,
    templates: Path | None = None,
    main_templates: Mapping[str, str] | None = None,
) -> str:
    """``BOARD.md``: totals, then one table per state group."""
    return _render(MARKDOWN_TEMPLATE, state, templates, main_templates)


def render_html(
    state: BoardState,
    *,
    templates: Path | None = None,
    main_templates: Mapping[str, str] | None = None,
) -> str:
    """One self-contained HTML page: inline CSS and inline SVG, no script, no external asset."""
    svgs = {
        "state_chart": Markup(chart.state_bar(state)),
        "timeline": Markup(chart.timeline(state)),
    }
    return _render(HTML_TEMPLATE, state, templates, main_templates, svgs)
