"""The one rich ``Console`` pair and the helpers every command uses to print.

Results go to stdout; diagnostics to stderr. ``NO_COLOR`` is honoured by rich itself,
and output that is not a terminal is plain text.
"""

from __future__ import annotations

import json
import sys
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
    per header; less when none of its cells is that long); rich then never squeezes one
    below its first word, so a narrow terminal shows fewer columns instead of one character
    per line.
    """
    from rich.cells import cell_len
    from rich.table import Table
    from rich.text import Text

    # Cell text comes from briefs, journals and records: plain Text, never rich markup.
    cells = [[Text(cell) if isinstance(cell, str) else cell for cell in row] for row in rows]
    limit = width or out.width

    def need(index: int) -> int:
        header = headers[index]
        natural = max([cell_len(header), *(row[index].cell_len for row in cells)])
        wanted = (floors or {}).get(header, floor)
        return max(cell_len(header.split()[0]), min(natural, wanted)) + 3  # padding, rule

    kept = list(range(len(headers)))
    order = [headers.index(name) for name in drop if name in headers]
    while order and sum(need(index) for index in kept) + 1 > limit:
        kept.remove(order.pop(0))
    table = Table(**options)
    for index in kept:
        header = headers[index]
        table.add_column(header, min_width=cell_len(header.split()[0]), overflow="fold")
    for row in cells:
        table.add_row(*(row[index] for index in kept))
    return table
