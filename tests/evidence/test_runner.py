"""The row runner against real processes: exit codes, timeouts, big output, secrets."""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from assay.evidence.runner import (
    TAIL_BYTES,
    gate_sandbox,
    row_argv,
    row_environment,
    run_row,
    withheld_values,
)
from assay.sandbox import sandbox_environment
from tests.forge_fixtures import wait_until
from tests.sandbox.probe import lock_is_free

PY = shlex.quote(sys.executable)


def test_plain_rows_run_without_a_shell_and_shell_rows_with_sh() -> None:
    assert row_argv("pytest -q 'tests/a b.py'") == ["pytest", "-q", "tests/a b.py"]
    assert row_argv("make test | tee log") == ["/bin/sh", "-c", "make test | tee log"]
    assert row_argv("FOO=1 make") == ["/bin/sh", "-c", "FOO=1 make"]
    assert row_argv("echo $HOME") == ["/bin/sh", "-c", "echo $HOME"]


def test_exit_code_digest_and_tail_are_captured(tmp_path: Path) -> None:
    command = f"{PY} -c \"import sys; print('hello'); sys.exit(3)\""
    result = run_row(command, cwd=tmp_path, timeout_s=30)
    assert result.exit == 3
    assert not result.passed
    assert result.output_sha256 == "sha256:" + hashlib.sha256(b"hello\n").hexdigest()
    assert result.output_tail == "hello"
    assert result.seconds > 0


def test_rows_run_in_the_given_tree(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("here\n")
    result = run_row("cat marker.txt", cwd=tmp_path, timeout_s=30)
    assert result.passed
    assert result.output_tail == "here"


def test_a_missing_program_is_a_failed_row(tmp_path: Path) -> None:
    result = run_row("no-such-program-assay --x", cwd=tmp_path, timeout_s=30)
    assert result.exit == 127
    assert "no-such-program-assay: No such file" in result.output_tail


# A background process holds a lock: pids inside the row's PID namespace mean nothing
# outside it, but a lock that can be taken proves its holder is gone.
_HOLDER = "setsid flock child.lock sh -c 'touch ready; exec sleep 300' & "
_READY = "while [ ! -e ready ]; do :; done; "


def test_a_hanging_row_is_killed_with_its_whole_namespace_at_the_timeout(tmp_path: Path) -> None:
    command = _HOLDER + _READY + "echo started; wait"
    started = time.monotonic()
    result = run_row(command, cwd=tmp_path, timeout_s=2.0)
    assert time.monotonic() - started < 60  # killed at its timeout, not after sleep 300
    assert result.timed_out
    assert result.exit == -9
    assert not result.passed
    assert "started" in result.output_tail
    assert (tmp_path / "ready").exists() and lock_is_free(tmp_path / "child.lock")


def test_a_row_leaving_a_background_process_finishes_and_the_process_is_killed(
    tmp_path: Path,
) -> None:
    result = run_row(_HOLDER + _READY + "echo done", cwd=tmp_path, timeout_s=60)
    assert result.exit == 0
    assert not result.timed_out
    assert result.seconds < 30
    assert lock_is_free(tmp_path / "child.lock")


def test_fifty_megabytes_of_output_are_digested_with_a_bounded_tail(tmp_path: Path) -> None:
    script = tmp_path / "loud.py"
    script.write_text(
        "import sys\n"
        "line = (b'x' * 99) + b'\\n'\n"
        "block = line * 10000\n"
        "for i in range(50):\n"
        "    sys.stdout.buffer.write(block)\n"
        "sys.stdout.buffer.write(b'last line\\n')\n"
    )
    expected = hashlib.sha256()
    block = ((b"x" * 99) + b"\n") * 10000
    for _ in range(50):
        expected.update(block)
    expected.update(b"last line\n")
    tracemalloc.start()
    try:
        result = run_row(f"{PY} loud.py", cwd=tmp_path, timeout_s=120)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.passed
    assert result.output_bytes == 50 * len(block) + len(b"last line\n")
    assert result.output_sha256 == "sha256:" + expected.hexdigest()
    assert result.output_tail.endswith("last line")
    assert len(result.output_tail.encode()) <= TAIL_BYTES
    assert peak < 2 * 1024 * 1024, f"peak {peak} bytes: output was held in memory"


def test_secrets_never_reach_a_row(tmp_path: Path) -> None:
    base = {
        "PATH": os.environ["PATH"],
        "GITHUB_TOKEN": "ghs_secret",
        "OPENAI_API_KEY": "sk-secret",
        "MY_PASSWORD": "hunter2",
        "AWS_ACCESS_KEY_ID": "AKIA",
        "GIT_DIR": "/elsewhere",
        "ASSAY_EVIDENCE_KEY": "gate-key",
        "HARMLESS": "visible",
        "PYTHONPATH": "/the/gates/own/checkout",
    }
    env = row_environment(base)
    result = run_row("env", cwd=tmp_path, timeout_s=30, env=env)
    assert "HARMLESS=visible" in result.output_tail
    for secret in (
        "ghs_secret",
        "sk-secret",
        "hunter2",
        "AKIA",
        "/elsewhere",
        "gate-key",
        "/the/gates/own/checkout",
    ):
        assert secret not in result.output_tail


def test_the_gate_process_is_shielded_from_rows_it_starts(tmp_path: Path) -> None:
    # In a child interpreter: after shielding, the process reports itself non-dumpable
    # (PR_GET_DUMPABLE = 3), so /proc/<pid>/environ and mem are closed to same-user rows,
    # while a row it starts (a fresh execve) is dumpable as usual.
    probe = (
        "import ctypes\n"
        "from assay.evidence.runner import shield_gate_process, run_row\n"
        "from pathlib import Path\n"
        "libc = ctypes.CDLL(None)\n"
        "assert shield_gate_process()\n"
        "print('gate', libc.prctl(3, 0, 0, 0, 0))\n"
        "r = run_row(\"python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))'\","
        " cwd=Path('.'), timeout_s=60)\n"
        "print('row', r.output_tail)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["gate", "0", "row", "1"]


def test_declared_secrets_are_withheld_and_listed_for_scrubbing(tmp_path: Path) -> None:
    base = {
        "PATH": os.environ["PATH"],
        "ASSAY_SECRET_ENV": "PLAIN_NAME, OTHER",
        "PLAIN_NAME": "declared-secret-value",
        "DEPLOY_TOKEN": "tok-123456789",
        "SHORT_TOKEN": "1",
        "VISIBLE": "fine",
    }
    env = row_environment(base)
    assert "PLAIN_NAME" not in env and "DEPLOY_TOKEN" not in env
    assert env["VISIBLE"] == "fine"
    assert sorted(withheld_values(base)) == ["declared-secret-value", "tok-123456789"]


def test_a_path_folder_holding_a_secret_is_left_out_and_the_rest_of_path_kept() -> None:
    # A PATH dropped whole would leave rows whatever os.defpath finds (another python), and
    # the gate fingerprinting an interpreter the desk never used.
    base = {
        "PATH": "/opt/tok-123456789/bin:/venv/bin:/usr/bin",
        "DEPLOY_TOKEN": "tok-123456789",
    }
    env = row_environment(base)
    assert env["PATH"] == "/venv/bin:/usr/bin"
    assert not any("tok-123456789" in value for value in env.values())
    sandboxed = sandbox_environment(source=base, withheld=["tok-123456789"])
    assert sandboxed["PATH"] == "/venv/bin:/usr/bin"


def test_variables_dropped_for_hygiene_are_not_secrets() -> None:
    # PYTHONPATH names the checkout whose venv PATH holds; a CA bundle path is in many
    # variables. Neither is a secret: nothing that holds it is dropped or scrubbed for it.
    base = {
        "PATH": "/work/checkout/.venv/bin:/usr/bin",
        "PYTHONPATH": "/work/checkout",
        "AWS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    }
    env = row_environment(base)
    assert env["PATH"] == base["PATH"]
    assert env["SSL_CERT_FILE"] == base["SSL_CERT_FILE"]
    assert "PYTHONPATH" not in env and "AWS_CA_BUNDLE" not in env  # still dropped by name
    assert withheld_values(base) == []


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_or_killed_gate_takes_its_running_row_down_with_it(
    tmp_path: Path, how: signal.Signals
) -> None:
    row = _HOLDER + _READY + "wait"
    # The probe sets the disposition it relies on: a suite started with SIGINT ignored (a
    # background job of a non-interactive shell, `nohup ... &`) hands the ignore down, and
    # an ignored SIGINT would never arrive.
    probe = (
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from pathlib import Path\n"
        "from assay.evidence.runner import run_row\n"
        f"run_row({row!r}, cwd=Path('.'), timeout_s=120)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    gate = subprocess.Popen(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: (tmp_path / "ready").exists(), what="the row")
        assert not lock_is_free(tmp_path / "child.lock")
        gate.send_signal(how)
        _, stderr = gate.communicate(timeout=30)
    finally:
        if gate.poll() is None:
            gate.kill()
            gate.communicate()
    if how == signal.SIGINT:
        assert "KeyboardInterrupt" in stderr
    # SIGKILL leaves the gate no last word: bwrap dies with it, and the namespace with bwrap.
    wait_until(lambda: lock_is_free(tmp_path / "child.lock"), timeout=30, what="the row's end")


def test_an_interpreter_reached_through_a_symlinked_prefix_runs_in_the_sandbox(
    tmp_path: Path,
) -> None:
    # A worktree's .venv is often a symlink to another checkout's: a row naming the gate's
    # interpreter by that path must find it inside the sandbox too.
    link = tmp_path / "linked-venv"
    link.symlink_to(Path(sys.prefix).resolve())
    python = link / "bin" / Path(sys.executable).name
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from assay.evidence.runner import run_row\n"
        "r = run_row(sys.executable + ' -c \"print(42)\"', cwd=Path('.'), timeout_s=60)\n"
        "print(r.exit, r.output_tail)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    work = tmp_path / "work"  # the row's tree is bound in: the link must be outside it
    work.mkdir()
    done = subprocess.run(
        [str(python), "-c", probe], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "42"]


def test_a_writable_folder_outside_the_tree_is_the_only_other_place_a_row_writes(
    tmp_path: Path,
) -> None:
    tree, reports, elsewhere = tmp_path / "tree", tmp_path / "reports", tmp_path / "elsewhere"
    for folder in (tree, reports, elsewhere):
        folder.mkdir()
    sandbox = gate_sandbox().with_writable(reports)
    command = f"sh -c 'echo r > {reports}/r.json; echo e > {elsewhere}/e || true'"
    result = run_row(command, cwd=tree, timeout_s=60, sandbox=sandbox)
    assert result.exit == 0, result.output_tail
    assert (reports / "r.json").read_text() == "r\n"
    assert not (elsewhere / "e").exists()
