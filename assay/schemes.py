"""The forge schemes that packages outside ``assay.forge`` add to ``open_forge``.

``open_forge`` knows paths and git URLs itself. A scheme such as ``github:`` belongs to a
package that builds on the forge (``assay.github``), so that package registers its opener
here when it is imported, and the CLI's start-up registers one that imports it on first
use; the forge never imports it. This module imports nothing, so the CLI can fill it
without loading git or HTTP code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assay.forge.base import Forge

ForgeOpener = Callable[..., "Forge"]
"""``opener(spec, *, cache_dir: Path | None) -> Forge`` for a spec starting with its prefix."""

_OPENERS: dict[str, ForgeOpener] = {}


def register_forge_scheme(prefix: str, opener: ForgeOpener) -> None:
    """Open every ``--forge`` value starting with ``prefix`` (``"github:"``) with ``opener``."""
    _OPENERS[prefix] = opener


def forge_opener(spec: str) -> ForgeOpener | None:
    """The opener registered for ``spec``'s scheme, or None."""
    return next((op for prefix, op in _OPENERS.items() if spec.startswith(prefix)), None)
