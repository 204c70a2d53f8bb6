"""Environment fingerprints: lock digests, tool versions, declaration checks, readable diffs."""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path

import pytest

from assay.errors import BadInput
from assay.evidence.fingerprint import (
    MISSING,
    declaration_problems,
    diff_fingerprints,
    fingerprint,
    fingerprint_digest,
)
from assay.evidence.spec import env_decl


def test_fingerprint_names_interpreter_locks_and_tools(tmp_path: Path) -> None:
    (tmp_path / "requirements.lock").write_bytes(b"pytest==8.0\n")
    env = {"python": "3", "lock": "requirements.lock", "tools": ["git"]}
    fp = fingerprint(env, tmp_path)
    assert fp["lock:requirements.lock"] == "sha256:" + hashlib.sha256(b"pytest==8.0\n").hexdigest()
    assert fp["tool:git"].startswith("git version")
    assert fp["python"].count(".") == 2
    assert declaration_problems(env, fp) == []


def test_the_interpreter_is_the_one_on_the_rows_path(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    script = fake / "python3"
    script.write_text("#!/bin/sh\necho Python 2.7.18\n")
    script.chmod(0o755)
    fp = fingerprint(None, tmp_path, run_env={"PATH": str(fake)})
    assert fp == {"python": "2.7.18"}
    assert declaration_problems({"python": "3.11"}, fp) == [
        "python: the brief declares 3.11, the environment has 2.7.18"
    ]
    assert fingerprint(None, tmp_path, run_env={"PATH": os.environ["PATH"]})["python"]


def test_missing_locks_and_tools_are_named(tmp_path: Path) -> None:
    env = {"lock": ["a.lock"], "tools": {"no-such-tool-assay": "1.0", "git": "99.0"}}
    fp = fingerprint(env, tmp_path)
    assert fp["lock:a.lock"] == MISSING
    assert fp["tool:no-such-tool-assay"] == MISSING
    problems = declaration_problems(env, fp)
    assert "lock:a.lock: declared by the brief but missing at this commit" in problems
    assert "tool:no-such-tool-assay: declared by the brief but not on PATH" in problems
    assert any(p.startswith("tool:git: the brief declares 99.0") for p in problems)


def test_a_different_lock_gives_a_readable_diff(tmp_path: Path) -> None:
    (tmp_path / "requirements.lock").write_text("pytest==8.0\n")
    desk = fingerprint({"lock": "requirements.lock"}, tmp_path)
    (tmp_path / "requirements.lock").write_text("pytest==7.0\n")
    gate = fingerprint({"lock": "requirements.lock"}, tmp_path)
    diff = diff_fingerprints(desk, gate)
    assert diff == [
        f"lock:requirements.lock: desk {desk['lock:requirements.lock']} "
        f"!= gate {gate['lock:requirements.lock']}"
    ]
    assert fingerprint_digest(desk) != fingerprint_digest(gate)
    assert diff_fingerprints(desk, {**desk, "tool:x": "1"}) == ["tool:x: desk (absent) != gate 1"]


def test_lock_paths_outside_the_tree_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"env\.lock"):
        fingerprint({"lock": "../etc/passwd"}, tmp_path)


def test_tool_names_must_be_plain_programs() -> None:
    with pytest.raises(BadInput, match=r"env\.tools"):
        env_decl({"tools": ["git; rm -rf /"]})


def test_python_declarations_match_by_prefix() -> None:
    fp = {"python": platform.python_version()}
    major_minor = ".".join(platform.python_version().split(".")[:2])
    assert declaration_problems({"python": major_minor}, fp) == []
    assert declaration_problems({"python": "2.7"}, fp) != []
