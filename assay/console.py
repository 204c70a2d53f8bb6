"""The one rich ``Console`` pair and the helpers every command uses to print.

Results go to stdout; diagnostics to stderr. ``NO_COLOR`` is honoured by rich itself,
and output that is not a terminal is plain text.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def print_json(payload: Any) -> None:
    """Write one JSON document to stdout, bypassing rich's markup and wrapping."""
    sys.stdout.write(json.dumps(payload, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


# Control characters (C0, DEL, C1), format characters (bidi overrides and isolates, zero
# widths), line and paragraph separators and lone surrogates: what a terminal, a Markdown
# viewer or a browser would act on or reorder instead of showing.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def printable(text: str, *, keep: str = "") -> str:
    """``text`` with each control or format character written as its escape (``\\x1b``,
    ``\\u202e``), so that text from a brief, a journal or a record cannot move the cursor,
    clear a terminal, ring its bell or reverse what follows it. ``keep`` names characters left
    as they are (``"\\n"`` for a multi-line body).

    Every table (``fitted_table``), the board (``BOARD.md`` and the HTML page) and the CLI's
    error line show untrusted text through this one function.
    """
    if text.isprintable():
        return text
    return "".join(_escaped(char) if char not in keep else char for char in text)


def _escaped(char: str) -> str:
    if char == " " or unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable_text(cell: str | Text) -> Text:
    """A table cell as plain ``Text`` (never rich markup), its text passed through ``printable``."""
    from rich.text import Text

    if isinstance(cell, str):
        return Text(printable(cell))
    if cell.plain.isprintable():
        return cell
    return Text(printable(cell.plain), style=cell.style)


WORD_CAP = 32  # a longer word (a hash, a path) may still be folded to fit


def fitted_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str | Text]],
    *,
    drop: Sequence[str] = (),
    width: int | None = None,
    floor: int = 10,
    floors: Mapping[str, int] | None = None,
    **options: Any,
) -> Table:
    """A table that stays legible at ``width`` (the console's): when the columns cannot all
    get a readable width, those named in ``drop`` are left out, in that order.

    A column is readable at its header's first word, or at ``floor`` characters (``floors``
    per header; less when none of its cells is that long), and at its longest word (up to
    ``WORD_CAP`` characters): a cell wraps between words, never inside one, so a narrow
    terminal shows fewer columns instead of ``compute:evidence.cla`` over ``imed``.
    """
    from rich.cells import cell_len
    from rich.table import Table

    # Cell text comes from briefs, journals and records: plain Text, never rich markup, and
    # never a control character.
    cells = [[printable_text(cell) for cell in row] for row in rows]
    limit = width or out.width

    def longest_word(index: int) -> int:
        words = (word for row in cells for word in row[index].plain.split())
        return min(WORD_CAP, max((cell_len(word) for word in words), default=0))

    words = [longest_word(index) for index in range(len(headers))]

    def need(index: int) -> int:
        header = headers[index]
        natural = max([cell_len(header), *(row[index].cell_len for row in cells)])
        wanted = max((floors or {}).get(header, floor), words[index])
        return max(cell_len(header.split()[0]), min(natural, wanted)) + 3  # padding, rule

    kept = list(range(len(headers)))
    order = [headers.index(name) for name in drop if name in headers]
    while order and sum(need(index) for index in kept) + 1 > limit:
        kept.remove(order.pop(0))
    table = Table(**options)
    for index in kept:
        header = headers[index]
        least = max(cell_len(header.split()[0]), words[index])
        table.add_column(header, min_width=least, overflow="fold")
    for row in cells:
        table.add_row(*(row[index] for index in kept))
    return table
