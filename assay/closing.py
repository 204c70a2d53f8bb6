"""``Closing``: the context-manager half of every handle Assay opens and must close.

A forge handle, an object reader: ``with`` one of them calls its ``close()``
on the way out, whatever happened inside.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    """A handle whose ``with`` block ends by calling :meth:`close`."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
