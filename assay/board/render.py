"""Rendering a ``BoardState`` through the ``board_templates/*.j2`` templates.

Rendering is a pure function of the state and the templates: no clock, no environment, no
dictionary-order surprises (rows arrive sorted from ``BoardState.groups``), so the same forge
state gives the same bytes. Templates come from ``--templates DIR`` when given, else the
``board_templates/`` folder of main on the forge (passed in as a mapping by the collector),
else the ones this checkout ships.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup, escape

from assay.board import chart
from assay.console import printable
from assay.errors import BadInput
from assay.forgestate.rows import BoardState
from assay.forgestate.times import duration, iso, parse_time

if TYPE_CHECKING:
    from assay.board.runs import RunPage

MARKDOWN_TEMPLATE = "board.md.j2"
HTML_TEMPLATE = "board.html.j2"
RUN_TEMPLATE = "run.html.j2"

SHIPPED_TEMPLATES = Path(__file__).resolve().parents[2] / "board_templates"


def when(moment: datetime | None) -> str:
    return "-" if moment is None else iso(moment)


# After these a long id, ref or step label may wrap; a run of 12 other characters may too.
_BREAK_AFTER = frozenset("/:._-@,;=+>")
_LONGEST_RUN = 12


def breakable(value: Any) -> Markup:
    """Escaped text with a line-break opportunity (``<wbr>``) after each separator and in
    every run of 12 characters: a table cell can wrap an id, a ref, a step label or a
    hostile 500-character word instead of pushing the table past the window's edge."""
    text = "" if value is None else str(value)
    chunks: list[str] = []
    begun = run = 0
    for index, char in enumerate(text):
        run = 0 if char.isspace() else run + 1
        if run and (char in _BREAK_AFTER or run >= _LONGEST_RUN):
            chunks.append(text[begun : index + 1])
            begun, run = index + 1, 0
    chunks.append(text[begun:])
    return Markup("<wbr>").join(escape(chunk) for chunk in chunks if chunk)


def lines(value: Any) -> Markup:
    """Escaped text that keeps its line breaks and tabs (a ``<pre>`` block's body); every
    other control or format character is shown as its escape, as everywhere else."""
    return Markup(escape(printable("" if value is None else str(value), keep="\n\t")))


def stamp(moment: datetime | str | None) -> Markup:
    """``when`` for HTML, with the one line-break opportunity after the date (``…T<wbr>…``)
    (a journal's time as written is read first; one that is no time is shown as it is)."""
    if isinstance(moment, str):
        parsed = parse_time(moment)
        if parsed is None:
            return Markup("{}").format(moment)
        moment = parsed
    date, sep, clock = when(moment).partition("T")
    if not sep:
        return Markup("{}").format(date)
    # Each half kept whole (class ``nw``: nowrap), so a cell breaks there and nowhere else.
    return Markup('<span class="nw">{}{}</span><wbr><span class="nw">{}</span>').format(
        date, sep, clock
    )


def money(usd: float) -> str:
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"


def number(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def cost(tokens: int, usd: float, seconds: float | None) -> str:
    """What one step cost, for a run page: ``1,500 tok $0.0042 4.0s`` (parts it has)."""
    parts = [f"{tokens:,} tok"] if tokens else []
    parts += [money(usd)] if usd else []
    parts += [f"{seconds:.1f}s" if seconds < 60 else duration(seconds)] if seconds else []
    return " ".join(parts)


def calls(model_calls: int, repeated: int = 0, repaid: int = 0) -> str:
    """Model calls, the requests sent upstream again (``12 +1 repeated``: a provider bills
    each request, so the call in flight at a kill is counted as paid twice), and the calls
    a lost machine took with it, paid again from the forge's checkpoint (``+3 repaid``)."""
    text = number(model_calls) + (f" +{number(repeated)} repeated" if repeated else "")
    return text + (f" +{number(repaid)} repaid" if repaid else "")


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
        duration=duration,
        when=when,
        stamp=stamp,
        breakable=breakable,
        lines=lines,
        money=money,
        number=number,
        md=md_cell,
        calls=calls,
        cost=cost,
    )
    return env


def _context(state: BoardState) -> dict[str, Any]:
    return {
        "board": state,
        "as_of": iso(state.as_of),
        "groups": state.groups(),
        "totals": state.totals(),
    }


def _template(env: jinja2.Environment, name: str, templates: Path | None) -> jinja2.Template:
    try:
        return env.get_template(name)
    except jinja2.TemplateNotFound as missing:
        where = templates if templates is not None else SHIPPED_TEMPLATES
        raise BadInput(f"--templates: no template {name} in {where}") from missing


def _fill(template: jinja2.Template, name: str, context: Mapping[str, Any]) -> str:
    try:
        return template.render(**context)
    except jinja2.TemplateError as broken:
        raise BadInput(f"{name}: the template failed to render: {broken}") from broken


def _render(
    name: str,
    state: BoardState,
    templates: Path | None,
    main_templates: Mapping[str, str] | None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    template = _template(_environment(templates, main_templates), name, templates)
    return _fill(template, name, {**_context(state), **(extra or {})})


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
    runs: Mapping[str, str] | None = None,
) -> str:
    """One self-contained HTML page: inline CSS and inline SVG, no script, no external asset.
    ``runs`` maps a brief to its run page (``runs/<brief>.html``): its id links there."""
    extra = {
        "state_chart": Markup(chart.state_bar(state)),
        "timeline": Markup(chart.timeline(state)),
        "runs": dict(runs or {}),
    }
    return _render(HTML_TEMPLATE, state, templates, main_templates, extra)


def render_run_pages(
    pages: Sequence[RunPage],
    state: BoardState,
    *,
    board_href: str,
    templates: Path | None = None,
    main_templates: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Each run page's HTML by its path beside the board (``runs/<brief>.html``), through
    ``run.html.j2``: self-contained as the board is, every text escaped (autoescape, then
    ``printable``), each linking back to the board at ``board_href`` (relative to it)."""
    env = _environment(templates, main_templates)
    template = _template(env, RUN_TEMPLATE, templates)
    as_of = iso(state.as_of)
    back = "../" + board_href
    return {
        page.href: _fill(
            template,
            RUN_TEMPLATE,
            {
                "board": state,
                "as_of": as_of,
                "page": page,
                "row": page.row,
                "board_href": back,
                "strip": Markup(chart.run_strip(page, state.as_of)),
            },
        )
        for page in pages
    }
