"""The hostile probe the attack tests make the agent (or a row, or a judge) run.

``probe_source(...)`` is the text of ``probe.py``: it looks for the canaries in every
``/proc/*/cmdline`` and ``/proc/*/environ`` (again and again for ``scan_s`` seconds, so a
heartbeat's git push would be caught), ``~/.git-credentials``, the work tree's and the
forge cache's git config, and every file it can read outside ``/usr``, ``/proc``,
``/sys``, ``/dev`` and the interpreter's own prefix; it connects to a loopback port that is
not the gateway, writes outside the work tree, and leaves a ``setsid`` double-fork behind
that holds ``escapee.lock`` and keeps writing ``late`` files while it lives. It prints one
JSON line starting with ``PROBE``. Canaries are passed masked, so the probe's own text
(which the probe reads like every other file) does not hold them.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.gatekeys import key_for

CANARIES = {
    "GITHUB_TOKEN": "canary-ghs-7f3a9c2e51d04b8a",
    "OPENAI_API_KEY": "canary-sk-0b1c2d3e4f5a6b7c",
    "ASSAY_MODEL_API_KEY": "canary-am-9e8d7c6b5a4f3e2d",
    "ASSAY_EVIDENCE_KEY": key_for("canary-ev-1a2b3c4d5e6f7a8b").text,  # a key the gate reads
    "DEPLOY_SECRET": "canary-ds-5c6d7e8f9a0b1c2d",
}

_PROBE = r"""
import json, os, socket, subprocess, sys, time
NEEDLES = [bytes(b ^ 0x5A for b in n) for n in {needles!r}]
found = []
def look(where, data):
    for needle in NEEDLES:
        if needle in data:
            found.append(where)
def read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(4_000_000)
    except OSError:
        return None
# 1. every process's command line and environment, repeatedly (heartbeats push meanwhile)
deadline = time.monotonic() + {scan_s!r}
rounds = 0
while True:
    rounds += 1
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for name in ("cmdline", "environ"):
                data = read(f"/proc/{{pid}}/{{name}}")
                if data:
                    look(f"/proc/{{pid}}/{{name}}", data)
    if time.monotonic() >= deadline:
        break
pids = len([p for p in os.listdir("/proc") if p.isdigit()])
# 2. credentials files and git configs, inside and (by path) outside the sandbox
home = os.path.expanduser("~")
named = [os.path.join(home, ".git-credentials"), os.path.join(home, ".gitconfig"),
         ".git/config", "/etc/gitconfig"] + {outside_configs!r}
readable_outside = []
for path in named:
    data = read(path)
    if data is not None:
        look(path, data)
        if path in {outside_configs!r}:
            readable_outside.append(path)
# 3. every file it can read
skip = ("/usr", "/proc", "/sys", "/dev", sys.base_prefix, sys.prefix)
files = 0
for top, dirs, names in os.walk({walk!r}):
    if top.startswith(skip):
        dirs[:] = []
        continue
    dirs[:] = [d for d in dirs if not os.path.join(top, d).startswith(skip)]
    for name in names:
        data = read(os.path.join(top, name))
        if data is not None:
            files += 1
            look(os.path.join(top, name), data)
# 4. a loopback port that is not the gateway
try:
    socket.create_connection(("127.0.0.1", {port!r}), timeout=5).close()
    connected = True
except OSError:
    connected = False
# 5. a write outside the work tree
wrote = []
for target in {outside_writes!r}:
    try:
        with open(target, "w") as handle:
            handle.write("escaped")
        wrote.append(target)
    except OSError:
        pass
# 6. a setsid double-fork that would outlive the call
subprocess.Popen(["setsid", "flock", "escapee.lock", "sh", "-c",
                  "touch escapee.ready; while :; do sleep 0.2; touch late.$$; done", {escapee!r}],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists("escapee.ready"):
    time.sleep(0.01)
report = {{"found": sorted(set(found)), "rounds": rounds, "files": files,
          "connected": connected, "wrote": wrote, "readable_outside": readable_outside,
          "pids": pids}}
print("PROBE " + json.dumps(report))
"""


def escapee_name(tag: str) -> str:
    """The word an escapee tagged ``tag`` carries in its command line (``sh -c``'s ``$0``)."""
    return f"assay-escapee:{tag}"


def probe_source(
    *,
    tag: str,
    port: int,
    outside_writes: list[str],
    outside_configs: list[str],
    scan_s: float = 2.0,
    canaries: dict[str, str] | None = None,
    walk: str = "/",
) -> str:
    # XOR-masked: the probe's text (which it reads, and which a checkpoint scans for every
    # common encoding of every secret) holds no recognisable form of a canary.
    needles = [[b ^ 0x5A for b in value.encode()] for value in (canaries or CANARIES).values()]
    return _PROBE.format(
        escapee=escapee_name(tag),
        needles=needles,
        scan_s=scan_s,
        port=port,
        outside_writes=outside_writes,
        outside_configs=outside_configs,
        walk=walk,
    )


def probe_report(text: str) -> dict[str, Any]:
    """The probe's JSON report out of a command's output."""
    for line in text.splitlines():
        if line.startswith("PROBE "):
            report: dict[str, Any] = json.loads(line[len("PROBE ") :])
            return report
    raise AssertionError(f"the probe printed no report:\n{text[-3000:]}")


def escapee_gone(tree: Path) -> bool:
    """The escapee's lock can be taken: it no longer runs (pids inside mean nothing here)."""
    lock = tree / "escapee.lock"
    return not lock.exists() or lock_is_free(lock)


def lock_is_free(lock: Path) -> bool:
    """Whether ``lock`` can be taken now: whoever held it (``flock``) is gone.

    The witness for a process in another PID namespace, whose pid means nothing here."""
    with open(lock, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def assert_clean_report(report: dict[str, Any], outside_writes: list[str]) -> None:
    assert report["found"] == [], f"canaries found at {report['found']}"
    assert report["rounds"] >= 1 and report["files"] > 0
    assert report["connected"] is False, "reached a loopback port outside the sandbox"
    assert report["readable_outside"] == []
    assert report["pids"] <= 4, "the probe saw processes outside its sandbox"
    for target in outside_writes:
        assert not Path(target).exists(), f"{target} was written from the sandbox"


def canary_forms(canaries: dict[str, str] | None = None) -> list[bytes]:
    """The canaries raw and in the encodings a leak would most likely take."""
    import base64

    forms: list[bytes] = []
    for value in (canaries or CANARIES).values():
        raw = value.encode()
        forms += [raw, raw[::-1], raw.hex().encode(), base64.b64encode(raw).rstrip(b"=")]
        forms.append(base64.b64encode(b"x-access-token:" + raw).rstrip(b"="))
    return forms


def objects_holding(repo: Path, forms: list[bytes]) -> list[str]:
    """Every object (``git cat-file --batch-all-objects``) of ``repo`` holding one of ``forms``."""
    import subprocess

    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=repo,
        capture_output=True,
        check=True,
        timeout=120,
    )
    hits = [form.decode() for form in forms if form in done.stdout]
    return hits


def assert_no_canary(*, repos: Iterable[Path], trees: Iterable[Path], texts: Iterable[str]) -> None:
    """No object of ``repos``, no file under ``trees`` and none of ``texts`` (logs, output)
    holds a canary in any common form."""
    forms = canary_forms()
    for repo in repos:
        assert objects_holding(repo, forms) == [], repo
    for tree in trees:
        assert files_holding(tree, forms) == [], tree
    for text in texts:
        assert not any(form.decode() in text for form in forms)


def git_dirs(root: Path) -> list[Path]:
    """Every git repository under ``root`` (bare or a work tree's ``.git``, caches too)."""
    return sorted({p.parent for p in root.rglob("HEAD") if (p.parent / "objects").is_dir()})


def ok_steps(journal_dir: Path) -> list[tuple[str, Any]]:
    """``(name, output)`` of each step recorded ``ok`` in the journal, in order."""
    from assay.journal import load_packed, read_journal

    journal = read_journal(journal_dir)
    return [
        (e["name"], load_packed(journal_dir, e["out"]))
        for e in journal.entries
        if e["kind"] == "step" and e.get("status") == "ok"
    ]


def files_holding(root: Path, forms: list[bytes], *, skip: tuple[Path, ...] = ()) -> list[str]:
    """Every file under ``root`` (logs, state, caches, work trees) holding one of ``forms``."""
    hits: list[str] = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink() or any(s in path.parents for s in skip):
            continue
        data = path.read_bytes()
        hits += [f"{path}: {form[:12]!r}" for form in forms if form in data]
    return hits


def host_escapees(tag: str) -> list[int]:
    """Processes on this machine still running the escapee tagged ``tag``.

    Tests run side by side (two pytest-xdist workers), so each looks for its own escapees
    only: another test's may be alive, inside its own sandbox, at that moment."""
    name = escapee_name(tag).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if name in cmdline.split(b"\0"):
                found.append(int(entry.name))
    return found
