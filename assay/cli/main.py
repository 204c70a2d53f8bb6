"""The root ``assay`` group and the one place errors become exit codes.

Each command group lives in its own module under ``assay.cli`` and adds itself to the
root through ``register(root)``. The root imports a module only when one of its commands
is run (or listed, for help and for walking the tree): the waker starts
``assay desk run`` on every approval, so start-up must not pay for every area. This module
also maps every ``AssayError`` to its exit code with one clear line (or a JSON object with
``--json``).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from assay import __version__
from assay.cli.options import output_mode
from assay.errors import AssayError, Internal
from assay.schemes import register_forge_scheme

# Modules that contribute commands, each defining ``register(root: click.Group) -> None``,
# with the top-level command names each one registers (a test checks the names). A name
# missing here still works: an unknown command name loads every module before giving up.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "assay.cli.local_run": ("run", "history", "replay"),
    "assay.cli.events": ("signal", "approve"),
    "assay.cli.forge": ("forge",),
    "assay.cli.claim": ("claim",),
    "assay.cli.brief": ("brief",),
    "assay.cli.desk": ("desk", "wake", "resync", "cancel"),
    "assay.cli.verify": ("verify", "merge"),
    "assay.cli.holdout": ("holdout",),
    "assay.cli.sweep": ("sweep",),
    "assay.cli.board": ("board", "status"),
    "assay.cli.github": ("github", "init"),
    "assay.cli.demo": ("demo",),
}


class LazyGroup(click.Group):
    """A click group whose commands come from ``register(root)`` modules, imported on demand.

    ``get_command(name)`` imports only the module that registers ``name``; ``commands``
    and ``list_commands`` (help, the reference generator, tests walking the tree) import
    every module first, so they always see the full tree.
    """

    def __init__(self, *args: Any, modules: dict[str, tuple[str, ...]], **kwargs: Any) -> None:
        self._modules = modules
        self._loaded: set[str] = set()
        self._registered: dict[str, click.Command] = {}
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        self._load_all()
        return self._registered

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        # click.Group.__init__ assigns the commands it was given (none here).
        self._registered = dict(value)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        # Written to the dict directly: going through ``commands`` would load every module.
        name = name or cmd.name
        if name is None:
            raise TypeError("Command has no name.")
        self._registered[name] = cmd

    def _load(self, module: str) -> None:
        if module not in self._loaded:
            self._loaded.add(module)
            importlib.import_module(module).register(self)

    def _load_all(self) -> None:
        for module in self._modules:
            self._load(module)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self._registered:
            owner = [m for m, names in self._modules.items() if cmd_name in names]
            for module in owner:
                self._load(module)
            if cmd_name not in self._registered:
                self._load_all()
        return self._registered.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)


@click.group(
    cls=LazyGroup,
    modules=COMMAND_MODULES,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "--version", prog_name="assay")
def root() -> None:
    """Assay: durable, claim-safe AI agent desks, with the git forge as the database."""


def _open_github(spec: str, **options: Any) -> Any:
    # Imported on first use: the GitHub client costs start-up time no other forge pays.
    from assay.github import open_github_forge

    return open_github_forge(spec, **options)


register_forge_scheme("github:", _open_github)


def _report(error: AssayError) -> int:
    # rich is not needed until something prints
    from assay.console import err, print_json, printable

    if output_mode.json:
        print_json(error.to_json())
    else:
        line = printable(f"assay: {error.status}: {error.message}", keep="\n")
        err.print(line, markup=False, highlight=False)
    return error.code


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit with the code of DESIGN.md section 8."""
    try:
        # Without standalone mode click returns (not raises) the code of ``ctx.exit(code)``.
        returned = root.main(args=argv, prog_name="assay", standalone_mode=False)
    except AssayError as error:
        sys.exit(_report(error))
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as usage:
        usage.show()
        sys.exit(usage.exit_code)
    except click.exceptions.Abort:
        from assay.console import err

        err.print("assay: aborted")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as failed:
        # A full disk under a writer that did not say where (ENOSPC, EDQUOT) is 69, as it
        # is for every writer that does; any other OSError is a bug.
        from assay.plumbing import no_space_error

        where = str(failed.filename or "a local disk")
        found = no_space_error(failed, where)
        sys.exit(_report(found or Internal(f"{type(failed).__name__}: {failed}")))
    except Exception as bug:  # the last line of defence: a bug still gets a clean exit 70
        sys.exit(_report(Internal(f"{type(bug).__name__}: {bug}")))
    sys.exit(returned if isinstance(returned, int) else 0)
