"""The one rich ``Console`` pair and the helpers every command uses to print.

Results go to stdout; diagnostics to stderr. ``NO_COLOR`` is honoured by rich itself,
and output that is not a terminal is plain text.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def print_json(payload: Any) -> None:
    """Write one JSON document to stdout, bypassing rich's markup and wrapping."""
    sys.stdout.write(json.dumps(payload, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
