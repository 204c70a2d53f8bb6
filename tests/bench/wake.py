"""Wake latency: ``python -m tests.bench.wake [--rounds N]`` (prints figures; not a test).

On an embedded forge served over smart HTTP with the post-receive wake hook installed, a
real desk (``assay desk run coder --once``, scripted model) runs a brief that ends waiting
for approval; then an approval is pushed, and the time from that push to the woken run's
next journal entry (its ``wake`` entry) is taken, and the time from the woken run's last
entry to the end of the process that ran it. Two ways, side by side in one run:

- ``waker``: the hook starts ``python -m assay.sweep.wake``, which starts ``assay desk run``
  (two interpreters in series);
- ``host``: the hook writes to the socket of a resident ``assay desk host``, which forks a
  warm child; the child's end is the host's ``exited`` line (stamped as it is read).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from assay.desks.records.events import EventLog
from assay.forge import ForgeServer, init_forge, open_forge
from assay.forgestate.source import read_snapshot
from assay.sweep.hook import install_wake_hook
from tests.bench import baseline
from tests.bench.board import _wake_time, write_coder_desk
from tests.conftest import assay_argv, assay_env
from tests.desks.world import brief_text
from tests.forge_fixtures import put_on_main


def _world(root: Path, briefs: list[str]) -> tuple[Path, Path]:
    forge_path = init_forge(root / "forge.git")
    desks = root / "desks"
    write_coder_desk(desks)
    put_on_main(forge_path, {f"briefs/{b}.md": brief_text(b, labels=["approval"]) for b in briefs})
    return forge_path, desks


class _HostLines:
    """Reads a host's stderr on a thread, stamping when each child's exit is reported."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.exited: dict[str, float] = {}
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            parts = line.split()
            if len(parts) >= 6 and parts[0] == "woke" and parts[4] == "exited":
                self.exited[parts[1].rstrip(":")] = time.time()


def measure(mode: str, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"assay-bench-wake-{mode}-") as tmp:
        root = Path(tmp)
        briefs = [f"wake-{n}" for n in range(rounds)]
        forge_path, desks = _world(root, briefs)
        env = assay_env({"ASSAY_STATE": str(root / "state")})
        host: subprocess.Popen[str] | None = None
        lines: _HostLines | None = None
        run_argv = [*assay_argv("desk", "run", "coder", "--once"), "--desks", str(desks)]
        if mode == "host":
            sock = root / "host.sock"
            install_wake_hook(forge_path, workdir=root, host_socket=sock)
            host = subprocess.Popen(
                [
                    *assay_argv("desk", "host", "--forge", str(forge_path)),
                    *("--desks", str(desks), "--socket", str(sock)),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert host.stdout is not None and host.stdout.readline().strip() == str(sock)
            lines = _HostLines(host)
        else:
            workdir = root / "waker"
            (workdir / "sweepers").mkdir(parents=True)
            (workdir / "sweepers" / "waker.yaml").write_text(
                f"kind: waker\ndispatch: local\ndesks_dir: {desks}\n"
            )
            install_wake_hook(forge_path, workdir=workdir)
        wake: list[float] = []
        exit_after: list[float] = []
        try:
            with ForgeServer(forge_path) as server:
                server.start()
                with open_forge(server.url, cache_dir=root / "probe") as forge:
                    for brief in briefs:
                        done = subprocess.run(
                            [*run_argv, "--brief", brief, "--forge", server.url],
                            env=env,
                            capture_output=True,
                            text=True,
                            timeout=120,
                        )
                        if done.returncode != 75:
                            raise RuntimeError(f"desk exited {done.returncode}: {done.stderr}")
                        log = EventLog(forge, brief)
                        log.read()  # so the append below is the push alone, not a read too
                        pushed = time.time()
                        log.append("approve", actor="bench")
                        deadline = time.monotonic() + 60
                        while time.monotonic() < deadline:
                            claim = read_snapshot(forge, only_brief=brief).claims.get(brief)
                            if claim is not None and claim.state == "done":
                                break
                            time.sleep(0.02)  # polling the forge, not synchronising
                        woke = _wake_time(forge, brief)
                        if woke is not None:
                            wake.append(woke - pushed)
                        if lines is not None:
                            last = read_snapshot(forge, only_brief=brief).journals[brief].last_at
                            while brief not in lines.exited and time.monotonic() < deadline:
                                time.sleep(0.02)  # the host's line is read on its thread
                            if last is not None and brief in lines.exited:
                                exit_after.append(lines.exited[brief] - last.timestamp())
        finally:
            if host is not None:
                host.terminate()
                host.wait(timeout=60)
        return {"mode": mode, "wake": wake, "exit": exit_after}


def summary(values: list[float]) -> str:
    if not values:
        return "not measured"
    return (
        f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms "
        f"({len(values)} runs)"
    )


def rows(figures: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    out = []
    for f in figures:
        how = "hook -> desk host child" if f["mode"] == "host" else "hook -> waker -> desk run"
        median = statistics.median(f["wake"]) if f["wake"] else float("nan")
        out.append(
            (
                f"wake: approval push -> woken run's next entry ({how})",
                summary(f["wake"]),
                f"target 250 ms median ({median / 0.25:.1f}x)",
            )
        )
        if f["exit"]:
            out.append(
                (f"wake: last step -> child exited ({how})", summary(f["exit"]), "target 1 s")
            )
    return out


def side_by_side(before: list[dict[str, Any]], after: list[dict[str, Any]], ref: str) -> list[str]:
    """Markdown lines: each median at ``ref`` and now, with the ratio."""
    lines = [f"| measure | {ref} | this checkout | ratio |", "| --- | ---: | ---: | ---: |"]
    old_by_mode = {f["mode"]: f for f in before}
    for f in after:
        old = old_by_mode.get(f["mode"])
        for key in ("wake", "exit"):
            if old is None or not old[key] or not f[key]:
                continue
            was, now = statistics.median(old[key]), statistics.median(f[key])
            name = f"{f['mode']}: {'push -> next entry' if key == 'wake' else 'last step -> exit'}"
            cells = f"{was * 1000:.0f} ms | {now * 1000:.0f} ms | {now / was:.2f}x"
            lines.append(f"| {name} (median) | {cells} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="waker,host", help="comma-separated: waker, host")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--baseline", metavar="REF", help="also measure commit REF first, side by side"
    )
    options = parser.parse_args(argv)
    modes = [m for m in options.modes.split(",") if m]
    size = ["--rounds", str(options.rounds), "--modes", ",".join(modes)]
    before = baseline.figures(options.baseline, "wake", size) if options.baseline else None
    figures = [measure(mode, options.rounds) for mode in modes]
    if options.json:
        print(json.dumps({"modes": figures}, indent=2))
    for name, value, note in rows(figures):
        print(f"{name:<64} {value:>34}  {note}")
    if before is not None:
        print("\n".join(side_by_side(before["modes"], figures, options.baseline)))


if __name__ == "__main__":
    sys.exit(main())
