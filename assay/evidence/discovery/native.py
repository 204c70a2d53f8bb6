"""Compiled languages' runners: ``go test`` and ``cargo test``.

- **go test**: ``*_test.go`` and ``testdata/`` in the named packages: relative patterns
  (``.``, ``./x``, ``./...``) and import paths (``example.com/m/a``, ``example.com/m/...``,
  ``all``) mapped to folders through the module's ``go.mod`` (the nearest one up from where
  go runs) and a ``go.work``'s modules; never a flag's value (``-run TestAdd``) nor what
  follows ``-args``; under ``-C DIR``. ``go.mod`` and ``go.work`` at every level from the
  root down (go looks up for both).
- **cargo test**: ``tests/`` and ``Cargo.toml`` of the package and of every member of its
  workspace (``[workspace] members``, globs and all, whatever ``-p`` or ``--workspace``
  choose: each member's tests are tests), ``[[test]] path`` targets, under
  ``--manifest-path``; ``Cargo.toml``, ``.cargo/config.toml`` (or ``config``) and
  ``rust-toolchain.toml`` (or ``rust-toolchain``) at every level (cargo looks up for its
  workspace and its configuration).
"""

from __future__ import annotations

import fnmatch
import posixpath
import tomllib
from typing import TYPE_CHECKING, Any

from assay.evidence.discovery.tree import ancestors, inside, join

if TYPE_CHECKING:
    from assay.evidence.discovery.core import Discovery

CARGO_CONFIG = (".cargo/config.toml", ".cargo/config", "rust-toolchain.toml", "rust-toolchain")
# go test's flags (its own, the build's and the test binary's) that take a value.
_GO_VALUE_FLAGS = frozenset(
    {
        "C", "run", "skip", "bench", "benchtime", "count", "cpu", "parallel", "timeout", "list",
        "shuffle", "fuzz", "fuzztime", "fuzzminimizetime", "coverprofile", "covermode",
        "coverpkg", "cpuprofile", "memprofile", "memprofilerate", "blockprofile",
        "blockprofilerate", "mutexprofile", "mutexprofilefraction", "outputdir", "trace",
        "exec", "o", "p", "tags", "mod", "modfile", "overlay", "pkgdir", "gcflags", "ldflags",
        "asmflags", "gccgoflags", "buildmode", "compiler", "installsuffix", "toolexec", "vet"
    }
)  # fmt: skip
# cargo test's options that take a value as the next word.
_CARGO_VALUE_FLAGS = frozenset(
    {
        "-p", "--package", "--manifest-path", "--test", "--bench", "--example", "--bin",
        "--features", "-F", "--target", "--target-dir", "-j", "--jobs", "--profile",
        "--exclude", "--config", "-Z", "--color", "--message-format", "--lockfile-path"
    }
)  # fmt: skip


# -- go -----------------------------------------------------------------------------------


def go(d: Discovery, args: list[str], *, cwd: str) -> None:
    d.found.runners.add("go")
    patterns, chdir = _go_packages(args)
    if chdir:  # go test -C DIR: everything is relative to DIR
        cwd = join(cwd, chdir) or cwd
    for level in ancestors(inside(cwd, "x")):  # go looks up for go.mod and go.work
        d.found.config.add(inside(level, "go.mod"))
        d.found.config.add(inside(level, "go.work"))
    modules = _go_modules(d, cwd)
    for pattern in patterns or ["."]:
        found = _go_folder(pattern, cwd=cwd, modules=modules)
        if found is None:
            continue
        folder, recursive = found
        # The package's module (and a go.mod the branch adds below it, which would cut
        # its folder out of the module and out of `./...`).
        for level in ancestors(inside(folder, "x")):
            d.found.config.add(inside(level, "go.mod"))
        if recursive:
            d.found.collect(folder, lambda rel: posixpath.basename(rel) == "go.mod", config=True)

        def match(rel: str, recursive: bool = recursive) -> bool:
            if not recursive and "/" in rel and not rel.startswith("testdata/"):
                return False
            return rel.endswith("_test.go") or "testdata/" in f"/{rel}"

        d.found.collect(folder, match)


def _go_packages(args: list[str]) -> tuple[list[str], str]:
    """The package patterns of ``go test ARGS`` and the folder ``-C`` names ("" for none):
    not the values of its flags (``-run TestAdd``), nor what follows ``-args`` (the test
    binary's own arguments)."""
    packages: list[str] = []
    chdir = ""
    words = iter(args)
    for word in words:
        if word in ("-args", "--args"):
            break
        if word.startswith("-"):
            name, eq, value = word.lstrip("-").partition("=")
            if not eq and name in _GO_VALUE_FLAGS:
                value = next(words, "")
            if name == "C":
                chdir = value
            continue
        packages.append(word)
    return packages, chdir


def _go_modules(d: Discovery, cwd: str) -> dict[str, str]:
    """Module path -> folder: the main module (the nearest ``go.mod`` up from ``cwd``) and
    the modules a ``go.work`` above uses, as main has them."""
    modules: dict[str, str] = {}
    for level in reversed(ancestors(inside(cwd, "x"))):
        work = d.read(inside(level, "go.work"))
        if work is not None:
            for folder in _go_work_uses(work):
                where = join(level, folder)
                if where is None:
                    continue
                path = _go_module_path(d.read(inside(where, "go.mod")))
                if path:
                    modules.setdefault(path, where)
            break
    for level in reversed(ancestors(inside(cwd, "x"))):
        path = _go_module_path(d.read(inside(level, "go.mod")))
        if path:
            modules[path] = level
            break
    return modules


def _go_module_path(text: str | None) -> str:
    for line in (text or "").splitlines():
        words = line.split("//", 1)[0].split()
        if len(words) >= 2 and words[0] == "module":
            return words[1].strip("\"'`")
    return ""


def _go_work_uses(text: str) -> list[str]:
    """The folders a ``go.work`` file ``use``s (one per line, or in a block)."""
    folders: list[str] = []
    block = False
    for line in text.splitlines():
        words = line.split("//", 1)[0].split()
        if not words:
            continue
        if block:
            if words[0] == ")":
                block = False
            else:
                folders.append(words[0].strip("\"'`"))
        elif words[0] == "use":
            if words[1:] == ["("]:
                block = True
            elif len(words) > 1:
                folders.append(words[1].strip("\"'`"))
    return folders


def _go_folder(pattern: str, *, cwd: str, modules: dict[str, str]) -> tuple[str, bool] | None:
    """(folder, recursive) for one package pattern, or None when it is outside the tree."""
    recursive = pattern.endswith("...")
    stem = pattern[: -len("...")].rstrip("/") if recursive else pattern
    if "..." in stem:  # a wildcard mid-pattern: everything below its fixed part
        stem, recursive = stem.split("...", 1)[0].rstrip("/"), True
    if pattern == "all":
        main = next((f for f in modules.values()), cwd)
        return main, True
    if stem in (".", "..") or stem.startswith(("./", "../")) or not stem:
        folder = join(cwd, stem or ".")
        return None if folder is None else (folder, recursive)
    for module_path, folder in sorted(modules.items(), key=lambda m: -len(m[0])):
        if stem == module_path or stem.startswith(module_path + "/"):
            rest = stem[len(module_path) + 1 :]
            found = join(folder, rest) if rest else folder
            return None if found is None else (found, recursive)
    return None  # the standard library or another module: not this tree's tests


# -- cargo --------------------------------------------------------------------------------


def cargo(d: Discovery, args: list[str], *, cwd: str) -> None:
    """``cargo test ARGS`` run in ``cwd``."""
    d.found.runners.add("cargo")
    manifest_folder = cwd
    words = iter(args)
    for word in words:
        if word == "--":
            break
        name, eq, value = word.partition("=")
        if name in _CARGO_VALUE_FLAGS and not eq:
            value = next(words, "")
        if name == "--manifest-path":
            manifest = join(cwd, value)
            if manifest is not None:
                d.found.config.add(manifest)
                manifest_folder = posixpath.dirname(manifest)
    # cargo reads .cargo/config.toml at every level up from where it runs (its build
    # target, rustflags, environment), rust-toolchain.toml picks the compiler, and a
    # Cargo.toml above names the workspace the package belongs to
    for folder in {cwd, manifest_folder}:
        for level in ancestors(inside(folder, "x")):
            d.found.config.add(inside(level, "Cargo.toml"))
            for name in CARGO_CONFIG:
                d.found.config.add(inside(level, name))
    packages = {manifest_folder}
    for level in ancestors(inside(manifest_folder, "x")):
        packages |= _workspace_members(d, level)
    for package in sorted(packages):
        d.found.config.add(inside(package, "Cargo.toml"))
        d.found.collect(inside(package, "tests") if package else "tests", lambda _p: True)
        for path in _test_targets(d, package):
            d.found.named.add(path)


def _manifest(d: Discovery, folder: str) -> dict[str, Any]:
    text = d.read(inside(folder, "Cargo.toml"))
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _workspace_members(d: Discovery, root: str) -> set[str]:
    """The member folders of the workspace whose root manifest is in ``root`` (none when
    main's manifest there declares no workspace)."""
    workspace = _manifest(d, root).get("workspace")
    if not isinstance(workspace, dict):
        return set()
    folders = set(d.main.dirs | d.branch.dirs)
    excluded = {join(root, str(e)) for e in workspace.get("exclude", []) if isinstance(e, str)}
    members: set[str] = set()
    for pattern in workspace.get("members", []):
        if not isinstance(pattern, str):
            continue
        wanted = join(root, pattern.rstrip("/"))
        if wanted is None:
            continue
        for folder in folders if any(c in wanted for c in "*?[") else {wanted}:
            # cargo's `*` stays within one folder
            depth_matches = folder.count("/") == wanted.count("/")
            if depth_matches and fnmatch.fnmatchcase(folder, wanted) and folder not in excluded:
                members.add(folder)
    return members


def _test_targets(d: Discovery, package: str) -> list[str]:
    """The paths of a package's ``[[test]]`` targets (tests outside ``tests/``)."""
    targets = _manifest(d, package).get("test", [])
    paths = []
    for target in targets if isinstance(targets, list) else []:
        path = target.get("path") if isinstance(target, dict) else None
        if isinstance(path, str):
            joined = join(package, path)
            if joined is not None:
                paths.append(joined)
    return paths
