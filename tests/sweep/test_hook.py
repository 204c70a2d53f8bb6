"""The wake hook: a push to an events ref runs the waker at once, over file:// and HTTP."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from assay.errors import BadInput
from assay.sweep.hook import hook_path, install_wake_hook, is_installed
from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main, serve_http, wait_until
from tests.sweep.helpers import brief_files, push_event, start_worker, status_record, sweepers


def _waiting(spec: str, brief: str, workdir: Path) -> None:
    worker = start_worker(spec, brief, workdir, "--wait")
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 75, out + err


@pytest.mark.parametrize("transport", ["file", "http"])
def test_an_approval_push_wakes_the_waiting_run_through_the_hook(
    forge_path: Path, tmp_path: Path, transport: str
) -> None:
    workdir = tmp_path / "waker"
    sweepers(workdir / "sweepers")  # the waker records the wake; dispatch: none
    install_wake_hook(forge_path, workdir=workdir)
    assert is_installed(forge_path)
    served = serve_http(forge_path) if transport == "http" else None
    try:
        spec = served.url if served else f"file://{forge_path}"
        put_on_main(spec, brief_files("hooked"))
        _waiting(spec, "hooked", tmp_path / "first")
        # Pushes to other refs (main, claims, the branch) woke nothing.
        assert status_record(spec, "hooked") is None

        pushed = time.monotonic()
        push_event(spec, "hooked", "approve", "hook-approval")
        status = wait_until(
            lambda: status_record(spec, "hooked"), timeout=30, what="the hook's wake record"
        )
        woken_after = time.monotonic() - pushed
    finally:
        if served:
            served.stop()
    assert status["state"] == "woken" and status["event"] == "hook-approval"
    assert woken_after < 30
    assert (forge_path / "assay-wake.log").exists()  # the hook started the waker
    if transport == "http":  # a served forge's hook has no HOME nor ASSAY_STATE to inherit
        assert (workdir / "state" / "cache").is_dir()  # the waker's cache: its folder, not ~


def test_install_refuses_foreign_hooks_and_non_repositories(
    tmp_path: Path, forge_path: Path
) -> None:
    with pytest.raises(BadInput, match="not a bare git repository"):
        install_wake_hook(tmp_path)
    hook = hook_path(forge_path)
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho mine\n")
    with pytest.raises(BadInput, match="not written by Assay"):
        install_wake_hook(forge_path)
    assert hook.read_text() == "#!/bin/sh\necho mine\n"


def test_install_hook_cli_is_idempotent(forge_path: Path, run_assay: AssayRunner) -> None:
    for _ in range(2):
        done = run_assay("sweep", "install-hook", str(forge_path), "--json")
        assert done.returncode == 0, done.stderr
    assert is_installed(forge_path)
    # The hook ignores a hostile ref name: it is never passed to a shell or the waker.
    script = hook_path(forge_path)
    done = subprocess.run(
        [str(script)],
        input=f"{'0' * 40} {'1' * 40} refs/assay/events/$(touch pwned)\n",
        text=True,
        cwd=forge_path,
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0
    assert not (forge_path / "pwned").exists()
    assert not (forge_path / "assay-wake.log").exists()  # nothing was started


def test_with_no_desk_host_listening_the_hook_starts_the_waker_itself(
    forge_path: Path, tmp_path: Path
) -> None:
    workdir = tmp_path / "waker"
    sweepers(workdir / "sweepers")
    install_wake_hook(forge_path, workdir=workdir, host_socket=tmp_path / "nobody.sock")
    spec = f"file://{forge_path}"
    put_on_main(spec, brief_files("hooked"))
    _waiting(spec, "hooked", tmp_path / "first")
    push_event(spec, "hooked", "approve", "no-host")
    status = wait_until(
        lambda: status_record(spec, "hooked"), timeout=30, what="the waker's wake record"
    )
    assert status["state"] == "woken" and status["event"] == "no-host"
    assert (forge_path / "assay-wake.log").exists()
