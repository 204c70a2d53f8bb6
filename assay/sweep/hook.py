"""The embedded forge's wake hook: a push to ``refs/assay/events/<brief>`` wakes that run.

``install_wake_hook(bare_repo)`` writes a git ``post-receive`` hook into the embedded
forge's bare repository. Git runs it after every accepted push (whether the push came over
``file://`` or through ``assay forge serve``'s smart HTTP); for each updated events ref it
writes ``wake ID`` to a resident ``assay desk host``'s Unix socket when one is configured
and listening (the host forks a warm child; no process starts here), else starts
``python -m assay.sweep.wake --brief ID --forge REPO`` (the lean form of ``assay sweep
wake``) detached, so the pusher does not wait and the waiting run resumes within a fraction
of a second, without any polling.

The hook is a few lines of ``sh`` that start a small Python script (standard library only,
next to the hook as ``assay-wake-hook.py``) only when the push moved an events ref: most
pushes are claims and steps, and each would otherwise pay an interpreter's start-up. The
shell only matches and prints git's lines as data; the Python script never runs a shell:
the brief id comes from a ref name a pusher chose, so it is checked against the id pattern
and passed as one argv element, never interpolated into a command.
Git's own ``GIT_*`` variables are removed from the child's environment, or every git command
the waker ran would act on the hook's repository instead of its own cache.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

import assay.refs as refs
from assay.errors import BadInput

HOOK_NAME = "post-receive"
MARKER = "# assay wake hook"
LOG_NAME = "assay-wake.log"

SCRIPT_NAME = "assay-wake-hook.py"

# git runs post-receive after every push and the pusher waits for it, so a hook that starts
# Python costs every claim, step and review push an interpreter's start-up. The shell front
# starts Python only for a push that moved an events ref; it passes git's lines on as data
# (a ref name is matched and printed, never evaluated).
_FRONT = """#!/bin/sh
{marker} (installed by `assay sweep install-hook`; reinstalling replaces it)
events=
while read -r old new ref; do
    case $ref in
        {events}*) events="$events$old $new $ref
";;
    esac
done
[ -n "$events" ] || exit 0
printf '%s' "$events" | exec {python} -IS {script}
"""

_TEMPLATE = """#!{python} -IS
{marker} (installed by `assay sweep install-hook`; reinstalling replaces it)
import os
import re
import socket
import subprocess
import sys

PYTHON = {python!r}
ASSAY_PATH = {assay_path!r}
FORGE = {forge!r}
LOG = {log!r}
WORKDIR = {workdir!r}
HOST_SOCKET = {host_socket!r}
PREFIX = {events!r}
SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,99}}")


def main():
    briefs = []
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith(PREFIX):
            continue
        if parts[1].strip("0") == "":
            continue  # the events ref was deleted: nothing to wake
        brief = parts[2][len(PREFIX):]
        if SAFE.fullmatch(brief) and ".." not in brief and brief not in briefs:
            briefs.append(brief)
    if not briefs:
        return
    if HOST_SOCKET and tell_host(briefs):
        return
    env = {{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ASSAY_PATH, env.get("PYTHONPATH")) if p)
    # A served forge's receive-pack has no HOME nor ASSAY_STATE: the waker's cache and logs
    # then live in its own folder, not in whatever home the server's user has.
    env.setdefault("ASSAY_STATE", os.path.join(WORKDIR, "state"))
    with open(LOG, "ab") as log:
        for brief in briefs:
            subprocess.Popen(
                [PYTHON, "-m", "assay.sweep.wake", "--brief", brief, "--forge", FORGE],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=WORKDIR,
                start_new_session=True,
            )


def tell_host(briefs):
    # A resident `assay desk host` wakes the runs from a warm interpreter; when it is not
    # listening, the waker process below does the same work, only slower.
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(2.0)
            conn.connect(HOST_SOCKET)
            conn.sendall("".join("wake " + b + "\\n" for b in briefs).encode())
        return True
    except OSError:
        return False


main()
"""


def hook_path(bare_repo: Path) -> Path:
    """Where git looks for the post-receive hook of ``bare_repo``."""
    return bare_repo / "hooks" / HOOK_NAME


def install_wake_hook(
    bare_repo: Path,
    *,
    forge_url: str | None = None,
    workdir: Path | None = None,
    python: str | None = None,
    host_socket: Path | None = None,
) -> Path:
    """Write (or replace) the wake hook in ``bare_repo``; return the hook's path.

    ``host_socket``: the Unix socket of an ``assay desk host``; the hook writes each woken
    brief to it (no process started) and starts the waker only when nobody listens there.

    ``forge_url`` is what the woken desk is told to use (default: the repository's own path,
    the fastest way to the same refs on this machine). ``workdir`` is where the waker runs,
    the folder holding ``sweepers/`` and ``desks/`` (default: the current directory). A hook
    not written by Assay is never overwritten: that is a ``BadInput`` naming the file.
    """
    repo = bare_repo.resolve()
    if not (repo / "HEAD").is_file() or not (repo / "objects").is_dir():
        raise BadInput(f"{bare_repo}: not a bare git repository (no HEAD or objects/)")
    path = hook_path(repo)
    if path.exists() and MARKER not in path.read_text(encoding="utf-8", errors="replace"):
        raise BadInput(f"{path}: a post-receive hook not written by Assay is already installed")
    assay_path = str(Path(__file__).resolve().parents[2])
    text = _TEMPLATE.format(
        python=python or sys.executable,
        marker=MARKER,
        events=refs.EVENTS,
        assay_path=assay_path,
        forge=forge_url or str(repo),
        log=str(repo / LOG_NAME),
        workdir=str((workdir or Path.cwd()).resolve()),
        host_socket=str(Path(host_socket).resolve()) if host_socket else "",
    )
    script = path.with_name(SCRIPT_NAME)
    front = _FRONT.format(
        marker=MARKER,
        events=refs.EVENTS,
        python=shlex.quote(python or sys.executable),
        script=shlex.quote(str(script)),
    )
    _write_executable(script, text)  # first: the front never runs a script not yet there
    _write_executable(path, front)
    return path


def _write_executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.chmod(temporary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(temporary, path)


def is_installed(bare_repo: Path) -> bool:
    """True when ``bare_repo`` carries Assay's wake hook."""
    path = hook_path(bare_repo)
    return path.is_file() and MARKER in path.read_text(encoding="utf-8", errors="replace")
