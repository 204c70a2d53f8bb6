"""The CLI's start-up imports only what the invoked command needs.

The waker starts ``assay desk run`` on every approval, so its start-up is wake latency:
the root group must not import every area to run one command.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click

from assay.cli.main import COMMAND_MODULES, LazyGroup, root
from tests.conftest import assay_env

HEAVY_AREAS = ("assay.runtime", "assay.board", "assay.evidence", "assay.sweep", "assay.briefs")


def _imported(*args: str) -> set[str]:
    """Modules loaded by ``python -m MODULE ARGS`` (``args[0]`` is ``-m``, or ``-c`` CODE)."""
    if args[0] == "-m":
        code = (
            "import atexit, json, runpy, sys\n"
            "atexit.register(lambda: sys.stderr.write("
            "'MODULES ' + json.dumps(sorted(sys.modules)) + '\\n'))\n"
            f"sys.argv = [{args[1]!r}, *{list(args[2:])!r}]\n"
            f"runpy.run_module({args[1]!r}, run_name='__main__', alter_sys=True)\n"
        )
    else:
        code = (
            f"{args[1]}\nimport json, sys\n"
            "print('MODULES ' + json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
        )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=assay_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


def test_version_imports_no_command_module() -> None:
    modules = _imported("-m", "assay", "--version")
    assert "assay.cli.main" in modules
    loaded = sorted(m for m in modules if m.startswith(("assay.cli.", *HEAVY_AREAS)))
    assert loaded == ["assay.cli.main", "assay.cli.options"]
    assert not {"httpx", "jinja2", "rich", "pydantic"} & modules


def test_one_command_imports_only_its_module() -> None:
    modules = _imported("-m", "assay", "desk", "run", "--help")
    assert "assay.cli.desk" in modules
    others = set(COMMAND_MODULES) - {"assay.cli.desk"}
    assert not others & modules
    assert not {m for m in modules if m.startswith(HEAVY_AREAS)}
    assert "httpx" not in modules


def test_desk_run_path_does_not_import_http_clients() -> None:
    # The desk loop itself (what `desk run` imports when it runs) needs no HTTP client
    # unless the desk's model is an HTTP adapter.
    modules = _imported("-c", "import assay.desks.host.loop")
    assert "assay.desks.host.loop" in modules
    assert not {"httpx", "jinja2", "github", "git", "http.server"} & modules


def test_each_module_registers_only_mapped_names() -> None:
    for module, names in COMMAND_MODULES.items():
        group = click.Group("probe")
        importlib.import_module(module).register(group)
        assert set(group.commands) <= set(names), module


def test_the_tree_is_complete_when_walked() -> None:
    expected: set[str] = set()
    for module in COMMAND_MODULES:
        group = click.Group("probe")
        importlib.import_module(module).register(group)
        expected |= set(group.commands)
    assert set(root.commands) == expected
    assert root.list_commands(click.Context(root)) == sorted(expected)


def test_get_command_loads_one_module_and_unknown_names_load_all() -> None:
    group = LazyGroup("probe", modules=COMMAND_MODULES)
    context = click.Context(group)
    claim = group.get_command(context, "claim")
    assert claim is not None and claim.name == "claim"
    assert set(group._registered) == {"claim"}
    assert group.get_command(context, "no-such-command") is None
    assert "desk" in group._registered
