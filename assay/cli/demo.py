"""Commands of this area; filled in by the module that owns it."""

from __future__ import annotations

import click


def register(root: click.Group) -> None:
    """Add this module's commands to the root group."""
