"""The ``python`` desk kind: the manifest's ``entry`` function, run in the work tree.

The function is deterministic orchestration over the durable ``Run`` like any desk; it
runs with the brief's work tree as its working directory (one slot per process, since the
working directory is the process's).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.briefs import Brief


def in_directory(
    function: Callable[[Any, Brief], Any], directory: Path
) -> Callable[[Any, Brief], Any]:
    """Run a ``python`` desk's function with the work tree as its working directory."""

    def wrapped(run: Any, brief: Brief) -> Any:
        previous = Path.cwd()
        os.chdir(directory)
        try:
            return function(run, brief)
        finally:
            os.chdir(previous)

    return wrapped
