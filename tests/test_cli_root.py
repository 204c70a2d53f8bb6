"""The CLI's root contract: version, help on every command, errors as exit codes."""

from __future__ import annotations

import click

from assay import __version__
from assay.cli.main import root
from tests.conftest import AssayRunner


def test_version_is_printed(run_assay: AssayRunner) -> None:
    done = run_assay("--version")
    assert done.returncode == 0
    assert __version__ in done.stdout


def _walk(
    group: click.Command, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, group)]
    if isinstance(group, click.Group):
        for name, command in sorted(group.commands.items()):
            found.extend(_walk(command, (*path, name)))
    return found


def test_every_command_has_help_text() -> None:
    missing = [" ".join(path) for path, command in _walk(root) if path and not command.help]
    assert missing == []


def test_unknown_command_is_a_usage_error(run_assay: AssayRunner) -> None:
    done = run_assay("no-such-command")
    assert done.returncode == 2
    assert "no-such-command" in done.stderr
