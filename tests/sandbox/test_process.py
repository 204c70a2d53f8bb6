"""The one process runner, attacked directly: escapes, network, writes, /proc, environment."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from assay.errors import BadInput, SandboxUnavailable
from assay.sandbox import (
    GatewayEndpoint,
    SandboxSpec,
    run_sandboxed,
    sandbox_environment,
    start_sandboxed,
)
from assay.sandbox.bwrap import bwrap_argv, require_sandbox
from assay.sandbox.environ import process_environment
from tests.forge_fixtures import wait_until

PY = sys.executable
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"
HOST_PATH = Path(__file__).resolve().parent / "written-from-the-sandbox"


def run(tree: Path, argv: list[str], **options: object) -> object:
    settings: dict[str, object] = {
        "cwd": tree,
        "env": sandbox_environment(),
        "spec": SandboxSpec(),
        "timeout_s": 60.0,
        "max_output_bytes": 64_000,
    }
    settings.update(options)
    return run_sandboxed(argv, **settings)  # type: ignore[arg-type]


def test_a_setsid_double_fork_dies_with_the_call(tmp_path: Path) -> None:
    # The escapee takes a lock, says so, and would write `late` afterwards; the runner
    # returns as soon as the shell exits. The lock being free proves the escapee is gone.
    script = (
        "setsid flock lock sh -c 'touch ready; while :; do touch late; done' "
        "</dev/null >/dev/null 2>&1 & "
        "while [ ! -e ready ]; do :; done; echo spawned"
    )
    result = run(tmp_path, ["/bin/sh", "-c", script])
    assert result.exit == 0 and "spawned" in result.output()  # type: ignore[attr-defined]
    with open(tmp_path / "lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the escapee lives
    (tmp_path / "late").unlink(missing_ok=True)
    with open(tmp_path / "lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert not (tmp_path / "late").exists()


def test_a_timeout_kills_the_whole_namespace(tmp_path: Path) -> None:
    result = run(tmp_path, ["/bin/sh", "-c", "sleep 300 & sleep 300"], timeout_s=0.5)
    assert result.timed_out and result.exit == -9  # type: ignore[attr-defined]
    assert result.seconds < 30  # type: ignore[attr-defined]


def test_killing_a_started_process_ends_everything_in_it(tmp_path: Path) -> None:
    script = "setsid flock lock sh -c 'touch ready; exec sleep 300' & wait"
    process = start_sandboxed(
        ["/bin/sh", "-c", script],
        cwd=tmp_path,
        env=sandbox_environment(),
        spec=SandboxSpec(),
        timeout_s=None,
        max_output_bytes=1000,
    )
    while not (tmp_path / "ready").exists():
        assert process.wait(0.05) is None
    process.kill()
    assert process.result().exit == -9
    with open(tmp_path / "lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_no_network_but_its_own_loopback(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            f"try: socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "except OSError as e: print('refused', e.errno)\n"
            "else: print('REACHED')\n"
        )
        result = run(tmp_path, [PY, "-c", code])
    assert "refused" in result.output() and "REACHED" not in result.output()  # type: ignore[attr-defined]


def test_the_gateway_is_the_only_thing_reachable(tmp_path: Path) -> None:
    sock = tmp_path / "gw.sock"
    tree = tmp_path / "tree"
    tree.mkdir()
    with socket.socket(socket.AF_UNIX) as gateway, socket.create_server(("127.0.0.1", 0)) as other:
        gateway.bind(str(sock))
        gateway.listen()

        def answer() -> None:
            client, _ = gateway.accept()
            client.sendall(b"gateway:" + client.recv(64))
            client.close()

        threading.Thread(target=answer, daemon=True).start()
        code = (
            "import socket\n"
            "s = socket.create_connection(('127.0.0.1', 9000)); s.sendall(b'hello')\n"
            "print(s.recv(64).decode())\n"
            f"try: socket.create_connection(('127.0.0.1', {other.getsockname()[1]}), timeout=5)\n"
            "except OSError: print('other refused')\n"
            "else: print('REACHED')\n"
        )
        result = run(
            tree,
            [PY, "-c", code],
            spec=SandboxSpec(network="gateway"),
            gateway=GatewayEndpoint(sock, 9000),
        )
    output = result.output()  # type: ignore[attr-defined]
    assert result.exit == 0, output  # type: ignore[attr-defined]
    assert "gateway:hello" in output and "other refused" in output and "REACHED" not in output


def test_gateway_network_without_an_endpoint_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="gateway"):
        run(tmp_path, ["/bin/true"], spec=SandboxSpec(network="gateway"))


def test_only_the_work_tree_is_writable(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    tree = tmp_path / "tree"
    tree.mkdir()
    script = (
        f"echo inside > kept; echo x > /tmp/scratch; cat /tmp/scratch; "
        f"echo x > {outside}; echo x > {HOST_PATH} || echo outside-refused; "
        "echo x > /etc/passwd || echo etc-refused; echo x > /usr/x || echo usr-refused"
    )
    result = run(tree, ["/bin/sh", "-c", script])
    output = result.output()  # type: ignore[attr-defined]
    assert (tree / "kept").read_text() == "inside\n"
    # The private /tmp takes the first write (gone with the call); the root is read-only.
    assert not outside.exists() and not HOST_PATH.exists() and "outside-refused" in output
    assert "etc-refused" in output and "usr-refused" in output
    assert not Path("/tmp/scratch").exists() or "x" not in Path("/tmp/scratch").read_text()


@pytest.mark.parametrize("isolation", ["on", "off"])
def test_a_process_gets_exactly_the_environment_process_environment_says(
    tmp_path: Path, isolation: str
) -> None:
    # The gate fingerprints its rows and a desk its commands by process_environment: if the
    # runner gave them anything else, the fingerprint would describe a process nobody ran.
    spec = SandboxSpec(isolation=isolation, network="host" if isolation == "off" else "none")
    given = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    dump = "import json, os; print(json.dumps(dict(os.environ)))"
    result = run(tmp_path, [PY, "-I", "-c", dump], env=given, spec=spec)
    seen = json.loads(result.output())  # type: ignore[attr-defined]
    expected = process_environment(spec, given)
    assert {k: seen.get(k) for k in expected} == expected
    if isolation == "on":
        assert expected["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    else:
        assert expected == given


def test_proc_shows_only_the_sandbox_and_the_environment_is_built_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANARY_TOKEN", "canary-f00d-1234")
    monkeypatch.setenv("HARMLESS_BUT_UNDECLARED", "canary-f00d-1234")
    code = (
        "import os\n"
        "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "print('pids', len(pids))\n"
        "blob = b''\n"
        "for p in pids:\n"
        "    for f in ('cmdline', 'environ'):\n"
        "        try: blob += open(f'/proc/{p}/{f}', 'rb').read()\n"
        "        except OSError: pass\n"
        "print('canary' if b'canary-' + b'f00d' in blob else 'clean')\n"
        "import json; print(json.dumps(sorted(os.environ)))\n"
    )
    result = run(tmp_path, [PY, "-c", code])
    output = result.output()  # type: ignore[attr-defined]
    assert "clean" in output and "canary" not in output.replace("clean", "")
    assert int(output.split("pids ")[1].split()[0]) <= 3  # bwrap's init, python (+ a child)
    names = json.loads(output.strip().splitlines()[-1])
    assert set(names) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "TERM",
        "HOME",
        "TMPDIR",
        "NO_COLOR",
        "PWD",
    }


def test_output_is_digested_counted_and_bounded(tmp_path: Path) -> None:
    code = "import sys\nsys.stdout.write('a' * 500_000 + 'END')\n"
    result = run(tmp_path, [PY, "-c", code], max_output_bytes=1000)
    expected = b"a" * 500_000 + b"END"
    assert result.output_bytes == len(expected)  # type: ignore[attr-defined]
    assert result.output_sha256 == "sha256:" + hashlib.sha256(expected).hexdigest()  # type: ignore[attr-defined]
    assert result.truncated and result.output().endswith("END")  # type: ignore[attr-defined]
    assert len(result.output()) < 1100  # type: ignore[attr-defined]


def test_stdin_is_fed_and_a_missing_program_exits_127(tmp_path: Path) -> None:
    fed = run(tmp_path, ["/bin/cat"], stdin=b"from the supervisor")
    assert fed.output() == "from the supervisor"  # type: ignore[attr-defined]
    missing = run(tmp_path, ["no-such-program-here"])
    assert missing.exit == 127  # type: ignore[attr-defined]


def test_unprivileged_user_gets_the_same_sandbox() -> None:
    # CI runs as root; the same bwrap command line must work for an ordinary user.
    with tempfile.TemporaryDirectory(prefix="assay-nobody-") as scratch:
        _as_nobody(Path(scratch))


def _as_nobody(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chown(tree, 65534, 65534)
    script = (
        "id -u; echo ok > kept; echo x > /tmp/t && cat /tmp/t; "
        f"echo x > {tmp_path}/escape; echo x > /etc/escape || echo refused"
    )
    argv = bwrap_argv(
        require_sandbox(), ["/bin/sh", "-c", script], cwd=tree, spec=SandboxSpec(toolchains=())
    )
    done = subprocess.run(
        [RUNUSER, "-u", "nobody", "--", *argv],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[0] == "65534" and "refused" in lines
    assert (tree / "kept").read_text() == "ok\n" and not (tmp_path / "escape").exists()


def test_missing_or_broken_bubblewrap_is_a_typed_error_saying_how_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_BWRAP", str(tmp_path / "absent"))
    with pytest.raises(SandboxUnavailable, match="install bubblewrap") as missing:
        run(tmp_path, ["/bin/true"])
    assert missing.value.code == 78
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("ASSAY_BWRAP", str(broken))
    with pytest.raises(SandboxUnavailable, match=r"uid map.*AppArmor.*isolation: off"):
        run(tmp_path, ["/bin/true"])
    # Declared unsandboxed, it runs without bubblewrap, and says so.
    result = run(tmp_path, ["/bin/echo", "bare"], spec=SandboxSpec(network="host", isolation="off"))
    assert result.output() == "bare\n" and not result.sandboxed  # type: ignore[attr-defined]


def test_the_supervisors_git_and_journal_stay_read_only_inside(tmp_path: Path) -> None:
    # The supervisor runs git in this tree with credentials in its environment: a hook or a
    # core.fsmonitor planted in .git would run outside the sandbox.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".assay" / "journal").mkdir(parents=True)
    config_before = (tmp_path / ".git" / "config").read_text()
    script = (
        "echo 'touch pwned' > .git/hooks/post-commit || echo hook-refused; "
        "git config core.fsmonitor 'touch pwned' || echo config-refused; "
        "echo forged > .assay/journal/000001.jsonl || echo journal-refused; "
        "echo fine > work.txt"
    )
    result = run(tmp_path, ["/bin/sh", "-c", script])
    output = result.output()  # type: ignore[attr-defined]
    assert "hook-refused" in output and "config-refused" in output
    assert "journal-refused" in output and (tmp_path / "work.txt").read_text() == "fine\n"
    assert not (tmp_path / ".git" / "hooks" / "post-commit").exists()
    assert (tmp_path / ".git" / "config").read_text() == config_before
    assert not (tmp_path / ".assay" / "journal" / "000001.jsonl").exists()


def test_a_program_that_cannot_start_unsandboxed_is_a_result_too(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        [str(tmp_path / "absent")],
        spec=SandboxSpec(network="host", isolation="off"),
        stdin=b"ignored",
    )
    assert result.exit == 127 and not result.started  # type: ignore[attr-defined]
    assert "cannot start" in result.output()  # type: ignore[attr-defined]


def test_a_long_running_process_logs_its_output_and_is_waited_for_in_slices(
    tmp_path: Path,
) -> None:
    log = tmp_path / "agent.log"
    tree = tmp_path / "tree"
    tree.mkdir()
    process = start_sandboxed(
        ["/bin/sh", "-c", "echo first; while [ ! -e go ]; do :; done; echo second; exit 3"],
        cwd=tree,
        env=sandbox_environment(),
        spec=SandboxSpec(),
        timeout_s=None,
        max_output_bytes=1000,
        output_log=log,
    )
    with process:
        wait_until(lambda: log.exists() and "first" in log.read_text(), what="the first line")
        assert process.wait(0.05) is None  # still running: the wait gave up, nothing killed
        (tree / "go").touch()
        assert process.wait(30) == 3
    result = process.result()
    assert result.exit == 3 and result.output() == "first\nsecond\n"
    assert log.read_text() == "first\nsecond\n"
