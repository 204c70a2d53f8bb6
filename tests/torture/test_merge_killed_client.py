"""``assay merge`` SIGKILLed in its own process just before and just after its one push.

The merge talks to a served forge through a proxy that holds the merge's push: before any
byte of it reaches the forge (the merge built its squash commit and sent the push, the
forge has nothing), or once the forge took it and answered (every ref moved; the answer
never reaches the merge). The merge process is killed there. The forge shows none of the
brief's merge, or all of it (main's squash commit, the run ref, the review marked merged);
the run ref is never lost; a merge run again finishes what was not done, and main gets one
commit for the brief whichever attempt made it. (``test_merge_killed`` holds the same push
inside the forge's ``receive-pack`` instead.)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AssayRunner, popen_assay
from tests.evidence.gatekit import BRIEF, Scene, git
from tests.forge_fixtures import serve_http, wait_until
from tests.torture.held_push import read_ref

GOOD = "def add(a, b):\n    return a + b\n"
RUN = f"refs/assay/runs/{BRIEF}/1"


class HoldingProxy:
    """A loopback proxy to a served forge that holds the first push through it: its request
    (``hold="request"``: never forwarded) or the forge's answer to it (``hold="answer"``:
    the push is forwarded, its answer swallowed). ``held`` is set when it holds."""

    def __init__(self, target_port: int, *, hold: str) -> None:
        self.target = ("127.0.0.1", target_port)
        self.hold = hold
        self.held = threading.Event()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> HoldingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=10)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.2)
                if ready:
                    client, _ = self._listener.accept()
                    threading.Thread(target=self._pipe, args=(client,), daemon=True).start()
            except OSError:
                return

    def _pipe(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.target, timeout=30)
        pushing = False  # this connection carries the push (git's POST to receive-pack)
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([client, upstream], [], [], 0.2)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is client:
                        pushing = pushing or (b"POST " in data and b"/git-receive-pack " in data)
                        if pushing and self.hold == "request":
                            self.held.set()
                            continue
                        upstream.sendall(data)
                    elif pushing and self.hold == "answer":
                        self.held.set()
                    else:
                        client.sendall(data)
        except OSError:
            return
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()


def _state(scene: Scene) -> dict[str, object]:
    review = json.loads(
        git("--git-dir", str(scene.forge), "show", f"refs/assay/reviews/{BRIEF}:review.json")
    )
    return {
        "main": read_ref(scene.forge, "refs/heads/main"),
        "run": read_ref(scene.forge, RUN),
        "review": review["state"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("hold", ["request", "answer"], ids=["before-push", "after-push"])
def test_a_merge_killed_around_its_push_leaves_all_or_nothing(
    tmp_path: Path, run_assay: AssayRunner, hold: str
) -> None:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    env = {"ASSAY_STATE": str(tmp_path / "state")}
    verified = run_assay("verify", BRIEF, "--forge", str(scene.forge), env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    before = _state(scene)
    assert before == {"main": scene.main_sha(), "run": None, "review": "ready"}

    served = serve_http(scene.forge)
    try:
        with HoldingProxy(int(served.url.split(":")[2].split("/")[0]), hold=hold) as proxy:
            url = served.url.replace(
                f":{served.url.split(':')[2].split('/')[0]}/", f":{proxy.port}/"
            )
            merging = popen_assay(["merge", BRIEF, "--forge", url], cwd=tmp_path, env=env)
            try:
                assert proxy.held.wait(timeout=120), "the merge never pushed"
                if hold == "answer":  # the forge took the push: its refs moved
                    wait_until(
                        lambda: read_ref(scene.forge, "refs/heads/main") != before["main"],
                        timeout=60,
                        what="the forge to take the held push",
                    )
            finally:
                os.killpg(merging.pid, signal.SIGKILL)
                merging.communicate(timeout=60)
    finally:
        served.stop()

    after = _state(scene)
    if hold == "answer":  # every ref moved, though the merge never heard it
        assert after["run"] == head and after["review"] == "merged"
        assert after["main"] != before["main"]
    else:
        assert after == before

    again = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    outcome = json.loads(again.stdout)["outcome"]
    assert outcome == ("up_to_date" if hold == "answer" else "squashed")
    final = _state(scene)
    assert final["run"] == head and final["review"] == "merged"
    assert (
        git("--git-dir", str(scene.forge), "rev-list", "--count", f"{before['main']}..main") == "1"
    )
    assert (
        git("--git-dir", str(scene.forge), "ls-tree", "-r", "--name-only", "main", ".assay") == ""
    )
