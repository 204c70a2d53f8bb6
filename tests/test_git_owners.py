"""git runs in assay/plumbing.py, assay/odb.py and assay/forge/ alone.

Every other module asks the forge (queries on its cache: refs, objects, trees, merge bases)
or one of plumbing's named work-tree functions. A module that spawns ``git`` itself,
imports plumbing's raw git runners or reaches into a forge's private cache fails here with
the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

ASSAY = REPO_ROOT / "assay"
OWNERS = (ASSAY / "plumbing.py", ASSAY / "odb.py", ASSAY / "forge")
SPAWNERS = {"run", "Popen", "call", "check_call", "check_output", "execvp", "spawnvp"}
# What other modules may take from plumbing: types, and the operations on a work tree.
PLUMBING_ALLOWED = {
    "ASSAY_IDENTITY",
    "GitError",
    "Identity",
    "NoSpace",
    "PushOutcome",
    "PushResult",
    "RefUpdate",
    "RetryPolicy",
    "TransportError",
    "local_disk",
    "no_space_error",  # an OSError read as NoSpace: no git
    "without_git_vars",
    "changed_files",
    "checkout_detached",
    "clone_branch",
    "restore_files",
}


def _owned(path: Path) -> bool:
    return any(path == owner or owner in path.parents for owner in OWNERS)


def _git_argv(node: ast.AST) -> bool:
    """A literal command line whose program is git: ``["git", ...]`` or ``("git", ...)``,
    wherever it is built (a variable handed to a runner later counts too)."""
    if isinstance(node, ast.List | ast.Tuple) and node.elts:
        first = node.elts[0]
        return isinstance(first, ast.Constant) and first.value == "git"
    return False


def _git_program(node: ast.expr) -> bool:
    """``"git"`` (or a ``"git ..."`` shell line) passed straight to a process runner."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    return node.value == "git" or node.value.startswith("git ")


def _reaches_into_a_cache(node: ast.AST) -> bool:
    """``forge._cache`` (or the old ``forge.cache``) of something other than ``self``."""
    if not (isinstance(node, ast.Attribute) and node.attr in ("_cache", "cache")):
        return False
    owner = node.value
    return not (isinstance(owner, ast.Name) and owner.id in ("self", "functools"))


def _whole_plumbing(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.module == "assay" and any(a.name == "plumbing" for a in node.names)
    return any(alias.name == "assay.plumbing" for alias in node.names)


def offences(source: str) -> list[str]:
    """Where ``source`` runs git or takes plumbing's git runners: ``"line: what"``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if _git_argv(node):
            found.append(f"{node.lineno}: builds a git command line")
        elif _reaches_into_a_cache(node):
            found.append(f"{node.lineno}: reaches into a forge's private cache")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in SPAWNERS and any(_git_program(arg) for arg in node.args):
                found.append(f"{node.lineno}: spawns git through {name}()")
        elif isinstance(node, ast.ImportFrom) and node.module == "assay.plumbing":
            for alias in node.names:
                if alias.name not in PLUMBING_ALLOWED:
                    found.append(f"{node.lineno}: imports assay.plumbing.{alias.name}")
        elif isinstance(node, ast.Import | ast.ImportFrom) and _whole_plumbing(node):
            found.append(f"{node.lineno}: imports the whole of assay.plumbing")
    return found


def test_no_module_but_plumbing_and_forge_runs_git() -> None:
    found = []
    for path in sorted(ASSAY.rglob("*.py")):
        if _owned(path):
            continue
        where = path.relative_to(REPO_ROOT)
        found += [f"{where}:{o}" for o in offences(path.read_text(encoding="utf-8"))]
    assert found == [], "git run outside plumbing/odb/forge:\n" + "\n".join(found)


def test_the_check_sees_every_way_of_running_git() -> None:
    # The shapes main had before the forge was closed: each must be caught.
    assert offences('subprocess.run(["git", "clone", src, dst])')
    assert offences('subprocess.Popen(("git", "-C", repo, "cat-file", "--batch"))')
    assert offences("from assay.plumbing import run_git")
    assert offences("from assay.plumbing import Identity, write_commit")
    assert offences("import assay.plumbing")
    assert offences("GitBatch(forge.cache)")
    assert offences("local_refs(forge._cache, name)")
    assert offences("from assay import plumbing")
    assert offences('os.execvp("git", argv)')
    assert offences('subprocess.run("git status", shell=True)')
    assert offences('argv = ["git", "for-each-ref", prefix]\nsubprocess.run(argv)')
    # ...and the named ways in are not.
    assert offences("from assay.plumbing import GitError, RefUpdate, restore_files") == []
    assert offences('subprocess.run(["npx", "codex"])') == []
    assert offences("@functools.cache\ndef f(): return self._cache") == []
