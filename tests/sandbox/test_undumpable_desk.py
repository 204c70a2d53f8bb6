"""``assay desk run`` is non-dumpable: even an unsandboxed command of the same (unprivileged)
user cannot read the desk's environment, where its credentials are.

Root may read any process's environ, so the desk runs as ``nobody`` here, with the system
Python and the project's dependencies on its path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from assay.forge import init_forge
from tests.conftest import REPO_ROOT
from tests.desks.world import brief_text
from tests.forge_fixtures import put_on_main

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


def test_an_unsandboxed_command_cannot_read_the_desks_environment() -> None:
    system_python = shutil.which("python3", path="/usr/bin")
    assert system_python, "the system python3 runs the desk as nobody"
    root = Path(tempfile.mkdtemp(prefix="assay-undumpable-"))
    try:
        os.chmod(root, 0o755)
        forge = init_forge(root / "forge.git")
        put_on_main(forge, {"briefs/b1.md": brief_text("b1")})
        desks = root / "desks"
        desks.mkdir()
        (desks / "peek.py").write_text(PEEK)
        manifest = {
            "name": "peek",
            "kind": "command",
            "takes": {"globs": ["*"]},
            "command": [system_python, str(desks / "peek.py")],
            "sandbox": {"network": "host", "isolation": "off"},  # nothing hides the desk
        }
        (desks / "peek.yaml").write_text(yaml.safe_dump(manifest))
        subprocess.run(["chown", "-R", "nobody:nogroup", str(root)], check=True)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(root),
            "NO_COLOR": "1",
            "PYTHONPATH": f"{REPO_ROOT}:{_site_packages()}",
            "ASSAY_STATE": str(root / "state"),
            "DEPLOY_TOKEN": "canary-desk-secret-1234",
        }
        argv = [system_python, "-m", "assay", "desk", "run", "peek", "--once", "--json"]
        argv += ["--forge", str(forge), "--desks", str(desks)]
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
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
        journal = root / "state" / "work" / "peek" / "b1" / ".assay" / "journal" / "b1"
        lines = [json.loads(line) for line in (journal / "000001.jsonl").read_text().splitlines()]
        [step] = [e for e in lines if e["kind"] == "step" and e.get("status") == "ok"]
        tail = step["out"]["value"]["tail"]
        assert "OWN True" in tail  # the command reads environs where it may...
        assert "REFUSED 13" in tail and "READ" not in tail  # ...but not the desk's
    finally:
        shutil.rmtree(root, ignore_errors=True)
