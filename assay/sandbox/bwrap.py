"""The bubblewrap command line for one sandboxed process, and whether bubblewrap works here.

The sandbox sees: ``/usr`` (and the ``/bin``, ``/lib*`` links) read-only, a short list of
``/etc`` files read-only, the declared toolchains' prefixes and read-only paths, a private
``/tmp`` holding ``HOME`` (a fresh folder, or a folder of the supervisor's when the spec
names one: an agent CLI's, whose session files the desk records), its own ``/proc`` and
``/dev``, and the work tree as the one writable path (besides the spec's own). It gets
its own PID, IPC, UTS and (unless ``network: host``) network namespaces, no capabilities, a
new session (no terminal to inject into), and dies with its parent. bwrap's own init is
PID 1 of the namespace, so when the command (or the gateway relay) exits, the kernel kills
whatever it left behind: ``setsid`` is no escape.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from assay.errors import BadInput, SandboxUnavailable
from assay.sandbox.spec import GatewayEndpoint, SandboxSpec

HOME = "/tmp/home"
PROTECTED = (".git", ".assay")
GATEWAY_SOCKET = "/run/assay/gateway.sock"
RELAY_SCRIPT = "/run/assay/relay.py"
WARDEN_SCRIPT = "/run/assay/warden.py"
_RELAY_SOURCE = Path(__file__).with_name("relay.py")
_WARDEN_SOURCE = Path(__file__).with_name("warden.py")
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Enough of /etc for users, name resolution, TLS roots, the dynamic linker and Debian's
# alternatives; nothing that holds credentials (no gitconfig, shadow, ssh or netrc).
_ETC = (
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "nsswitch.conf",
    "gai.conf",
    "protocols",
    "services",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "alternatives",
    "ssl",
    "ca-certificates",
    "mime.types",
    "os-release",
    "debian_version",
)

FIX = (
    "install bubblewrap (apt-get install bubblewrap), allow unprivileged user namespaces "
    "(Ubuntu: sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile "
    "for bwrap), or declare `sandbox: {network: host, isolation: off}` in the desk manifest "
    "to run unsandboxed"
)


def bwrap_path() -> str | None:
    """The bubblewrap executable (``$ASSAY_BWRAP`` overrides the PATH lookup)."""
    configured = os.environ.get("ASSAY_BWRAP")
    if configured is not None:
        return configured if configured and Path(configured).is_file() else None
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def _probe(executable: str) -> str:
    """'' when ``executable`` can build a sandbox here, else what it said."""
    argv = [executable, *_namespaces(SandboxSpec()), *_system_mounts(), "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    return done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"


def sandbox_available() -> bool:
    """Whether bubblewrap is installed and can create namespaces on this machine."""
    executable = bwrap_path()
    return executable is not None and _probe(executable) == ""


def require_sandbox() -> str:
    """The bwrap executable, or ``SandboxUnavailable`` saying why and how to fix it."""
    executable = bwrap_path()
    if executable is None:
        raise SandboxUnavailable(f"the sandbox needs bubblewrap, which is not installed: {FIX}")
    problem = _probe(executable)
    if problem:
        raise SandboxUnavailable(
            f"bubblewrap cannot create a sandbox here ({problem[:200]}): {FIX}"
        )
    return executable


def _namespaces(spec: SandboxSpec) -> list[str]:
    flags = [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
    ]
    if spec.network != "host":
        flags.append("--unshare-net")
    return flags


def _system_mounts() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for link in _SYSTEM_LINKS:
        path = Path(link)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), link]
        elif path.is_dir():
            args += ["--ro-bind", link, link]
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", HOME]


def toolchain_paths(names: tuple[str, ...]) -> Iterator[Path]:
    """Prefixes outside ``/usr`` that the named toolchains need (a venv, pyenv, nvm)."""
    if "python" in names:
        for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix):
            yield Path(os.path.realpath(prefix))
        yield Path(os.path.realpath(sys.executable)).parent.parent
    if "node" in names:
        node = shutil.which("node")
        if node:
            yield Path(os.path.realpath(node)).parent.parent


def _toolchain_links(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """(link, target) for an interpreter reached through a symlinked prefix (a worktree's
    ``.venv`` pointing at another checkout's): the rows name it by the link's path."""
    if "python" not in names:
        return []
    prefix = Path(sys.executable).parent.parent
    if not prefix.is_symlink() or Path("/usr") in prefix.parents:
        return []
    return [(str(prefix), os.path.realpath(prefix))]


def toolchain_path(names: tuple[str, ...], path: str) -> str:
    """``path`` with the declared toolchains' bin directories first, so ``python`` inside
    is the supervisor's interpreter (a venv, pyenv) rather than a shim that is not mounted."""
    bins: list[str] = []
    if "python" in names:
        bins.append(str(Path(sys.executable).parent))
    node = shutil.which("node") if "node" in names else None
    if node:
        bins.append(str(Path(node).parent))
    parts = [p for p in path.split(os.pathsep) if p]
    return os.pathsep.join([*dict.fromkeys([*bins, *parts])])


def _outside_system(paths: Iterator[Path]) -> list[Path]:
    unique: list[Path] = []
    for path in paths:
        if path == Path("/usr") or Path("/usr") in path.parents or path == Path("/"):
            continue
        if path not in unique:
            unique.append(path)
    return unique


def bwrap_argv(
    executable: str,
    argv: list[str],
    *,
    cwd: Path,
    spec: SandboxSpec,
    gateway: GatewayEndpoint | None = None,
    status_fd: int | None = None,
) -> list[str]:
    """The full command line: bwrap, its mounts, then ``argv`` (behind the relay for gateway).

    ``status_fd``: bwrap writes ``{"child-pid": N}`` there, the namespace's init as seen
    from outside, so the runner can wait until the namespace is really gone."""
    if spec.network == "gateway" and gateway is None:
        raise BadInput("sandbox.network is gateway, but no gateway endpoint was given")
    toolchains = spec.toolchains if spec.network != "gateway" else (*spec.toolchains, "python")
    args = _sandbox_args(executable, cwd=cwd, spec=spec, toolchains=toolchains)
    if status_fd is not None:
        args += ["--json-status-fd", str(status_fd)]
    if spec.network == "gateway" and gateway is not None:
        args += ["--ro-bind", str(gateway.socket_path), GATEWAY_SOCKET]
        args += ["--ro-bind", str(_RELAY_SOURCE), RELAY_SCRIPT]
        relay = [os.path.realpath(sys.executable), "-I", "-S", RELAY_SCRIPT]
        argv = [*relay, str(gateway.port), GATEWAY_SOCKET, "--", *argv]
    # The root is bwrap's own tmpfs: read-only, so a write outside the tree fails loudly.
    return [*args, "--remount-ro", "/", "--", *argv]


def warden_argv(executable: str, control_fd: int, *, cwd: Path, spec: SandboxSpec) -> list[str]:
    """The command line of a ward (``assay.sandbox.ward``): the same sandbox as
    ``bwrap_argv``'s, with the warden (``assay.sandbox.warden``) as its PID 1, serving the
    calls that ``control_fd`` brings. ``spec`` must declare the python toolchain (the
    warden is a Python program) and a network other than the gateway."""
    if "python" not in spec.toolchains or spec.network == "gateway":
        raise BadInput("a ward needs the python toolchain and a network other than gateway")
    args = _sandbox_args(executable, cwd=cwd, spec=spec, toolchains=spec.toolchains)
    args += ["--as-pid-1", "--ro-bind", str(_WARDEN_SOURCE), WARDEN_SCRIPT]
    warden = [os.path.realpath(sys.executable), "-I", "-S", WARDEN_SCRIPT, str(control_fd), HOME]
    return [*args, "--remount-ro", "/", "--", *warden]


def _sandbox_args(
    executable: str, *, cwd: Path, spec: SandboxSpec, toolchains: tuple[str, ...]
) -> list[str]:
    """bwrap, its namespaces and every mount but the last remount."""
    args = [executable, *_namespaces(spec), *_system_mounts()]
    if spec.network == "host":
        args += ["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
    for path in _outside_system(toolchain_paths(toolchains)):
        args += ["--ro-bind-try", str(path), str(path)]
    links = _toolchain_links(toolchains)
    for link, target in links:
        args += ["--symlink", target, link]

    def inside(path: Path, resolved: Path) -> str:
        # A path through a linked prefix is reached by the link: mount where it points.
        linked = any(Path(link) == path or Path(link) in path.parents for link, _ in links)
        return str(resolved) if linked else str(path)

    for path in spec.read_only:
        resolved = Path(os.path.realpath(path))
        if not resolved.exists():
            raise BadInput(f"sandbox.read_only: {path} does not exist")
        args += ["--ro-bind", str(resolved), inside(Path(path), resolved)]
    for path in spec.writable:
        resolved = Path(os.path.realpath(path))
        if not resolved.is_dir():
            raise BadInput(f"sandbox.writable: {path} is not a folder")
        args += ["--bind", str(resolved), inside(Path(path), resolved)]
    if spec.home is not None:
        # The CLI's session files must outlive the process, for the desk to record them.
        home = Path(os.path.realpath(spec.home))
        if not home.is_dir():
            raise BadInput(f"the sandbox's HOME {spec.home} is not a folder")
        args += ["--bind", str(home), HOME]
    work = Path(os.path.realpath(cwd))
    args += ["--bind", str(work), str(work), "--chdir", str(work)]
    for name in PROTECTED:
        # The supervisor runs git here with credentials: a hook or a core.fsmonitor written
        # into .git would run outside the sandbox; the journal is the supervisor's record.
        if (work / name).exists():
            args += ["--ro-bind", str(work / name), str(work / name)]
    return args
