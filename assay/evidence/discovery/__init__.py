"""The acceptance set: what a row's runner would collect and read, by the runner's own rules.

A row is parsed as the shell would split it (``&&``, ``;``, ``|``, ``cd DIR``) into simple
commands; each command is matched to the runner it starts (``core``) and that runner's
discovery rules name the files it would collect and the configuration it would read:

- ``python``: pytest, unittest (bare and dotted module names, ``discover -p``), tox, nox;
- ``js``: node's test runner (the files and folders on its command, node's default
  patterns), jest, vitest, bun, and ``npm``/``yarn``/``pnpm`` scripts followed into main's
  ``package.json``;
- ``native``: ``go test`` (relative and import-path packages, ``go.mod`` and ``go.work``
  at every level) and ``cargo test`` (every workspace member's ``tests/``);
- ``make``: the makefile and what it includes, and the target's recipe, discovered in turn.

The result is pure (``Acceptance``: named paths, whole folders, configuration, collected
tests, runners); ``assay.evidence.pinning`` restores it from main.
"""

from assay.evidence.discovery.core import Discovery, discover, row_runners
from assay.evidence.discovery.tree import Acceptance, Tree, simple_commands

__all__ = ["Acceptance", "Discovery", "Tree", "discover", "row_runners", "simple_commands"]
