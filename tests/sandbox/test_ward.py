"""A ward (one sandbox kept for a run) attacked from the calls that enter it: each call
must find what a sandbox of its own would give it, and leave nothing for the next."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from assay.sandbox import SandboxSpec, sandbox_environment
from assay.sandbox.ward import Ward
from tests.conftest import assay_env
from tests.forge_fixtures import wait_until
from tests.sandbox.probe import lock_is_free

UNSANDBOXED = SandboxSpec(network="host", isolation="off")
ESCAPEE = "setsid flock lock sh -c 'touch ready; exec sleep 600' </dev/null >/dev/null 2>&1 &"


def run(ward: Ward, script: str, **options: object) -> object:
    settings: dict[str, object] = {
        "env": sandbox_environment(),
        "timeout_s": 60.0,
        "max_output_bytes": 64_000,
    }
    settings.update(options)
    return ward.run(["/bin/sh", "-c", script], **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", [SandboxSpec(), UNSANDBOXED], ids=["bubblewrap", "unsandboxed"])
def test_nothing_a_call_starts_outlives_it_and_the_next_call_starts_clean(
    tmp_path: Path, spec: SandboxSpec
) -> None:
    with Ward(tmp_path, spec) as ward:
        first = run(ward, f"{ESCAPEE} while [ ! -e ready ]; do :; done; echo $$")
        assert first.exit == 0  # type: ignore[attr-defined]
        assert lock_is_free(tmp_path / "lock")  # the setsid'd double-fork died with the call
        if spec.sandboxed:
            # The same sandbox, a fresh /tmp and HOME: nothing the first call left there.
            planted = run(ward, "echo x > /tmp/planted; echo y > $HOME/planted; echo ok")
            assert planted.output() == "ok\n"  # type: ignore[attr-defined]
            seen = run(ward, "echo home:$(ls -A $HOME) tmp:$(ls -A /tmp)")
            # Left in /tmp: HOME, and the folders that lead to the work tree's mount.
            mounts = {"home", *([tmp_path.parts[2]] if tmp_path.parts[1] == "tmp" else [])}
            assert seen.output() == f"home: tmp:{' '.join(sorted(mounts))}\n"  # type: ignore[attr-defined]
            alive = run(ward, "ls /proc | grep -c '^[0-9]'")
            assert int(alive.output()) <= 4  # type: ignore[attr-defined]  # warden, sh, ls, grep
        timed = run(ward, f"{ESCAPEE} sleep 300", timeout_s=0.5)
        assert timed.timed_out and timed.exit == -9  # type: ignore[attr-defined]
        wait_until(lambda: (tmp_path / "ready").exists(), what="the escapee's ready file")
        assert lock_is_free(tmp_path / "lock")
        again = run(ward, "echo still serving")
        assert again.output() == "still serving\n"  # type: ignore[attr-defined]


def test_a_call_cannot_signal_trace_or_read_its_warden(tmp_path: Path) -> None:
    # The warden is PID 1 of the namespace: the kernel drops the signals a process inside
    # sends it (it handles none but SIGCHLD), and it is not dumpable.
    attack = (
        "kill -KILL 1; kill -TERM 1; kill -INT 1; kill -STOP 1; "
        "cat /proc/1/environ >/dev/null 2>&1 && echo READ-ENVIRON; "
        "head -c1 /proc/1/mem >/dev/null 2>&1 && echo READ-MEM; "
        "ls -l /proc/1/fd >/dev/null 2>&1 && echo LISTED-FDS; echo done"
    )
    with Ward(tmp_path, SandboxSpec()) as ward:
        assert run(ward, "true").exit == 0  # type: ignore[attr-defined]
        warden = ward._warden
        attacked = run(ward, attack)
        output = attacked.output()  # type: ignore[attr-defined]
        assert "done" in output and "READ-" not in output and "LISTED-FDS" not in output
        after = run(ward, "echo served")
        assert after.output() == "served\n"  # type: ignore[attr-defined]
        assert ward._warden is warden and warden is not None and warden.process.poll() is None


def test_git_and_the_journal_made_after_the_ward_started_are_read_only_inside(
    tmp_path: Path,
) -> None:
    with Ward(tmp_path, SandboxSpec()) as ward:
        assert run(ward, "echo before").exit == 0  # type: ignore[attr-defined]
        (tmp_path / ".assay").mkdir()  # the journal appears only now: a new ward protects it
        forged = run(ward, "echo forged > .assay/entry || echo refused")
        assert "refused" in forged.output()  # type: ignore[attr-defined]
        assert not (tmp_path / ".assay" / "entry").exists()


def test_a_warden_killed_from_outside_is_replaced_at_the_next_call(tmp_path: Path) -> None:
    with Ward(tmp_path, SandboxSpec()) as ward:
        assert run(ward, "true").exit == 0  # type: ignore[attr-defined]
        warden = ward._warden
        assert warden is not None
        os.killpg(warden.process.pid, signal.SIGKILL)
        warden.process.wait()
        assert run(ward, "echo back").output() == "back\n"  # type: ignore[attr-defined]


SUPERVISOR = """
import sys
from pathlib import Path
from assay.sandbox import SandboxSpec, sandbox_environment
from assay.sandbox.ward import Ward

off = SandboxSpec(network="host", isolation="off")
ward = Ward(Path(sys.argv[1]), SandboxSpec() if sys.argv[2] == "bubblewrap" else off)
ward.run(["/bin/true"], env=sandbox_environment(), timeout_s=60, max_output_bytes=100)
ward.run(["/bin/sh", "-c", sys.argv[3]], env=sandbox_environment(), timeout_s=600,
         max_output_bytes=100)
"""


@pytest.mark.parametrize("kind", ["bubblewrap", "unsandboxed"])
def test_a_killed_supervisor_takes_its_ward_down(tmp_path: Path, kind: str) -> None:
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, str(tmp_path), kind, f"{ESCAPEE} exec sleep 600"],
        env=assay_env({}),
        start_new_session=True,
    )
    try:
        wait_until(lambda: (tmp_path / "ready").exists(), timeout=60, what="the escapee")
        assert not lock_is_free(tmp_path / "lock")
        os.kill(supervisor.pid, signal.SIGKILL)
        supervisor.wait(timeout=30)
        wait_until(lambda: lock_is_free(tmp_path / "lock"), timeout=30, what="the ward's end")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(supervisor.pid, signal.SIGKILL)
        supervisor.wait(timeout=30)
