"""The desk as an unprivileged user: its sandbox works, and it is non-dumpable, so even an
unsandboxed command of the same user cannot read the desk's environment (its credentials).

CI runs as root, and root may read any process's environ, so the desk runs as ``nobody``
here, with the system Python and the project's dependencies on its path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

from assay.forge import init_forge
from tests.conftest import REPO_ROOT
from tests.desks.world import brief_text
from tests.forge_fixtures import put_on_main
from tests.sandbox.probe import escapee_name, host_escapees

PEEK = """\
import os
try:
    data = open(f"/proc/{os.getppid()}/environ", "rb").read()
    print("READ", b"canary-" in data)
except OSError as exc:
    print("REFUSED", exc.errno)
print("OWN", b"NO_COLOR" in open("/proc/self/environ", "rb").read())
"""


def _site_packages() -> str:
    import pydantic

    return str(Path(pydantic.__file__).resolve().parent.parent)


@contextlib.contextmanager
def _traversable(*paths: Path) -> Iterator[None]:
    """Let ``nobody`` pass through (search, not list) every folder above ``paths``: a
    checkout may sit under a private folder (``mktemp -d`` makes them 0700). Restored after."""
    changed: dict[Path, int] = {}
    for path in paths:
        for folder in [path, *path.parents]:
            mode = folder.stat().st_mode
            if folder not in changed and not mode & stat.S_IXOTH:
                changed[folder] = mode
                folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
    try:
        yield
    finally:
        for folder, mode in changed.items():
            folder.chmod(stat.S_IMODE(mode))


def _run_as_nobody(
    command: list[str], sandbox: dict[str, str] | None, files: dict[str, str]
) -> str:
    """Run a ``command`` desk once as ``nobody``; the tail its command printed."""
    system_python = shutil.which("python3", path="/usr/bin")
    assert system_python, "the system python3 runs the desk as nobody"
    root = Path(tempfile.mkdtemp(prefix="assay-nobody-desk-"))
    try:
        os.chmod(root, 0o755)
        forge = init_forge(root / "forge.git")
        put_on_main(forge, {"briefs/b1.md": brief_text("b1")})
        desks = root / "desks"
        desks.mkdir()
        for name, text in files.items():
            (desks / name).write_text(text)
        manifest: dict[str, object] = {
            "name": "probe",
            "kind": "command",
            "takes": {"globs": ["*"]},
            "command": [part.replace("{desks}", str(desks)) for part in command],
        }
        if sandbox:
            manifest["sandbox"] = sandbox
        (desks / "probe.yaml").write_text(yaml.safe_dump(manifest))
        subprocess.run(["chown", "-R", "nobody:nogroup", str(root)], check=True)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(root),
            "NO_COLOR": "1",
            "PYTHONPATH": f"{REPO_ROOT}:{_site_packages()}",
            "ASSAY_STATE": str(root / "state"),
            "DEPLOY_TOKEN": "canary-desk-secret-1234",
        }
        argv = [system_python, "-m", "assay", "desk", "run", "probe", "--once", "--json"]
        argv += ["--forge", str(forge), "--desks", str(desks)]
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        with _traversable(REPO_ROOT, Path(_site_packages())):
            done = subprocess.run(
                [runuser, "-u", "nobody", "--", *argv],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        assert done.returncode == 0, done.stdout + done.stderr
        journal = root / "state" / "work" / "probe" / "b1" / ".assay" / "journal" / "b1"
        lines = [json.loads(line) for line in (journal / "000001.jsonl").read_text().splitlines()]
        [step] = [e for e in lines if e["kind"] == "step" and e.get("status") == "ok"]
        return str(step["out"]["value"]["tail"])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_unsandboxed_command_cannot_read_the_desks_environment() -> None:
    tail = _run_as_nobody(
        ["/usr/bin/python3", "{desks}/peek.py"],
        {"network": "host", "isolation": "off"},  # nothing hides the desk
        {"peek.py": PEEK},
    )
    assert "OWN True" in tail  # the command reads environs where it may...
    assert "REFUSED 13" in tail and "READ" not in tail  # ...but not the desk's


def test_an_unprivileged_desk_runs_its_command_in_the_sandbox(tmp_path: Path) -> None:
    # The whole runner as an ordinary user: user namespaces, the status pipe, the wait for
    # the namespace's end, and a setsid escapee that must not outlive the command.
    script = (
        "id -u; echo x > /etc/escape || echo etc-refused; ls /proc | grep -c '^[0-9]'; "
        "setsid flock escapee.lock sh -c 'touch escapee.ready; exec sleep 600' "
        f"{shlex.quote(escapee_name(str(tmp_path)))} & "
        "while [ ! -e escapee.ready ]; do :; done; echo spawned"
    )
    tail = _run_as_nobody(["/bin/sh", "-c", script], None, {})
    lines = tail.split()
    assert lines[0] == "65534" and "etc-refused" in lines and "spawned" in lines
    assert int(lines[lines.index("etc-refused") + 1]) <= 4  # only its own processes
    assert host_escapees(str(tmp_path)) == []
