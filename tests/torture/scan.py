"""Scan everything a run left behind for a secret: plain files (logs, local journals, work
trees, stats) and every object of every git repository (forge, caches, work trees), where
commits, trees and blobs are compressed and a plain ``grep`` would miss them."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _git_dirs(root: Path) -> list[Path]:
    found = []
    for head in root.rglob("HEAD"):
        folder = head.parent
        if (folder / "objects").is_dir() and (folder / "refs").is_dir():
            found.append(folder)
    return found


def scan_for_secret(root: Path, secret: str, *, skip: tuple[str, ...] = ("desks",)) -> list[str]:
    """Where ``secret`` appears under ``root`` (files and git objects); ``skip`` top-level
    folders hold the inputs that legitimately carry it (the scripted model's answers)."""
    needle = secret.encode()
    hits = []
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if relative.parts[0] in skip or not path.is_file() or path.is_symlink():
            continue
        try:
            if needle in path.read_bytes():
                hits.append(str(relative))
        except OSError:
            continue
    for git_dir in _git_dirs(root):
        if git_dir.relative_to(root).parts[0] in skip:
            continue
        dump = subprocess.run(
            ["git", f"--git-dir={git_dir}", "cat-file", "--batch-all-objects", "--batch"],
            capture_output=True,
            check=True,
        ).stdout
        if needle in dump:
            hits.append(f"{git_dir.relative_to(root)} (a git object)")
        refs = subprocess.run(
            ["git", f"--git-dir={git_dir}", "for-each-ref", "--format=%(refname) %(contents)"],
            capture_output=True,
            check=True,
        ).stdout
        if needle in refs:
            hits.append(f"{git_dir.relative_to(root)} (a ref's message)")
    return hits
