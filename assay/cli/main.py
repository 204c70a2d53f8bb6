"""The root ``assay`` group and the one place errors become exit codes.

Each command group lives in its own module under ``assay.cli`` and adds itself to the
root through ``register(root)``; this module only wires them and maps every
``AssayError`` to its exit code with one clear line (or a JSON object with ``--json``).
"""

from __future__ import annotations

import importlib
import sys

import click

from assay import __version__
from assay.cli.options import output_mode
from assay.console import err, print_json
from assay.errors import AssayError, Internal

# Modules that contribute commands; each defines ``register(root: click.Group) -> None``.
COMMAND_MODULES = (
    "assay.cli.local_run",
    "assay.cli.events",
    "assay.cli.forge",
    "assay.cli.claim",
    "assay.cli.brief",
    "assay.cli.desk",
    "assay.cli.verify",
    "assay.cli.sweep",
    "assay.cli.board",
    "assay.cli.github",
    "assay.cli.demo",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="assay")
def root() -> None:
    """Assay: durable, claim-safe AI agent desks, with the git forge as the database."""


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(root)


def _report(error: AssayError) -> int:
    if output_mode.json:
        print_json(error.to_json())
    else:
        err.print(f"assay: {error.status}: {error.message}", markup=False, highlight=False)
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
        err.print("assay: aborted")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as bug:  # the last line of defence: a bug still gets a clean exit 70
        sys.exit(_report(Internal(f"{type(bug).__name__}: {bug}")))
    sys.exit(returned if isinstance(returned, int) else 0)
