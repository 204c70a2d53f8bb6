"""The warden: the first process of a ward, where nothing a call starts outlives the call.

Run by the supervisor as ``python -I -S warden.py FD [HOME]`` (standard library only:
Assay itself is not importable inside the sandbox). ``FD`` is a Unix stream socket to the
supervisor (``assay.sandbox.ward``), which sends one call at a time as a frame (``frame``):
``run`` (the program's working directory, argv and whole environment, with the output
pipe and, when it is fed, the stdin pipe as ``SCM_RIGHTS``) or ``kill``. The warden
answers ``started PID`` (or ``failed ERRNO MESSAGE``, having written ``cannot start ...``
to the output), then ``exit STATUS`` (the raw wait status) once the program and every
process it started are gone.

Where it runs:

- As PID 1 of a sandbox's PID namespace (``bwrap --as-pid-1``): a call ends with
  ``kill(-1, SIGKILL)``, which reaches every other process of the namespace, a ``setsid``
  double-fork too, and nothing outside it. With ``HOME`` given it then empties the private
  ``/tmp`` and makes ``HOME`` again, so each call starts as a fresh sandbox would. A process
  inside cannot signal the warden (the kernel drops a signal sent to a namespace's init
  from inside unless init handles it, and it handles only SIGCHLD) nor trace it or read its
  memory (it is not dumpable).
- Bare, for an unsandboxed run: a child subreaper (``PR_SET_CHILD_SUBREAPER``), so an
  orphan anywhere below it, a double-forked ``setsid``'d one too, is re-parented to it
  rather than to init, and a call ends by killing every descendant ``/proc`` shows (each
  through a pidfd, checked to be still below it, so a recycled pid is never hit).

Whatever ends the supervisor, SIGKILL included, closes ``FD``: the warden reads EOF, ends
the call in flight the same way and exits. A socket rather than ``PR_SET_PDEATHSIG``: the
death signal follows the *thread* that forked the child, not the process, and reaches
only the child itself, not an orphan that has left it.

It imports only C modules (``_signal``, ``_socket``: their Python wrappers import ``enum``,
which would double the warden's start-up) and ``ctypes`` for ``prctl``.
"""

from __future__ import annotations

import _signal
import _socket
import os
import select
import sys
import time

TYPE_CHECKING = False  # typing's own would cost an import at every warden's start
if TYPE_CHECKING:
    from collections.abc import Callable

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
_HEADER = 4
_READ = 1 << 16
_CLEAR_GRACE_S = 30.0  # a process that cannot be killed (another user's) is given up on


def frame(*fields: bytes) -> bytes:
    """One message to the warden: its length, then its fields joined by NUL (argv and
    environment strings cannot hold one)."""
    body = b"\0".join(fields)
    return len(body).to_bytes(_HEADER, "big") + body


def run_frame(cwd: str, argv: list[str], env: dict[str, str]) -> bytes:
    """The ``run`` message: the working directory, the argv and the whole environment."""
    fields = [b"run", os.fsencode(cwd), str(len(argv)).encode(), *map(os.fsencode, argv)]
    return frame(*fields, *(os.fsencode(f"{k}={v}") for k, v in env.items()))


KILL = frame(b"kill")


def _decode_run(fields: list[bytes]) -> tuple[bytes, list[bytes], dict[bytes, bytes]]:
    count = int(fields[2])
    argv = fields[3 : 3 + count]
    env = dict(item.split(b"=", 1) for item in fields[3 + count :])
    return fields[1], argv, env


class Warden:
    """Serves the supervisor's calls until it goes away (see the module docstring)."""

    def __init__(self, control: _socket.socket, home: str | None) -> None:
        self.control = control
        self.pid1 = os.getpid() == 1
        self.home = home if self.pid1 else None  # never empty the host's /tmp
        self.inbox = bytearray()
        self.passed: list[int] = []  # descriptors received with the frame being read
        self.call: int | None = None  # the running program's pid
        self.status: int | None = None  # its wait status, once reaped
        self.wake, self.wake_writer = os.pipe()
        os.set_blocking(self.wake, False)
        os.set_blocking(self.wake_writer, False)
        _signal.set_wakeup_fd(self.wake_writer)
        _signal.signal(_signal.SIGCHLD, lambda *_: None)

    def serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.control.fileno(), self.wake], [], [])
            if self.wake in ready:
                self._drain()
                self._reap()
            if self.control.fileno() in ready and not self._receive():
                self._clear()  # the supervisor is gone (or done): nothing outlives it
                return
            if self.call is not None and self.status is not None:
                self._end_call()

    # -- the supervisor's messages ---------------------------------------------------------

    def _receive(self) -> bool:
        """Read what arrived and act on each whole frame; False at EOF."""
        try:
            data, ancillary, _, _ = self.control.recvmsg(_READ, _socket.CMSG_SPACE(2 * 4))
        except InterruptedError:
            return True
        except OSError:
            return False
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                count = len(payload) // 4
                for index in range(count):
                    passed = int.from_bytes(payload[4 * index : 4 * index + 4], sys.byteorder)
                    os.set_inheritable(passed, False)
                    self.passed.append(passed)
        if not data:
            return False
        self.inbox += data
        while len(self.inbox) >= _HEADER:
            size = int.from_bytes(self.inbox[:_HEADER], "big")
            if len(self.inbox) < _HEADER + size:
                break
            fields = bytes(self.inbox[_HEADER : _HEADER + size]).split(b"\0")
            del self.inbox[: _HEADER + size]
            if fields[0] == b"run":
                self._start(*_decode_run(fields))
            elif fields[0] == b"kill" and self.call is not None:
                self._clear()
        return True

    def _start(self, cwd: bytes, argv: list[bytes], env: dict[bytes, bytes]) -> None:
        passed, self.passed = self.passed, []
        if self.call is not None or not passed or not argv:
            for descriptor in passed:
                os.close(descriptor)
            self._say(b"failed 16 a call is already running")
            return
        output = passed[0]
        stdin = passed[1] if len(passed) > 1 else os.open(os.devnull, os.O_RDONLY)
        actions = [
            (os.POSIX_SPAWN_DUP2, stdin, 0),
            (os.POSIX_SPAWN_DUP2, output, 1),
            (os.POSIX_SPAWN_DUP2, output, 2),
        ]
        pid: int | None = None
        error: OSError | None = None
        try:
            os.chdir(cwd)
            for path in _candidates(argv[0], env):
                try:
                    pid = os.posix_spawn(
                        path,
                        argv,
                        env,
                        file_actions=actions,
                        setsid=True,
                        setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
                    )
                    break
                except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
                    error = error if isinstance(error, PermissionError) else exc  # as execvp
        except OSError as exc:
            error = exc
        if pid is None:
            reason = (error.strerror if error is not None else None) or "not found"
            name = argv[0].decode("utf-8", "replace")
            _quietly(os.write, output, f"cannot start {name}: {reason}\n".encode())
        for descriptor in {stdin, output}:
            os.close(descriptor)
        if pid is None:
            code = error.errno if error is not None and error.errno else 0
            self._say(b"failed %d %s" % (code, reason.encode()))
            return
        self.call, self.status = pid, None
        self._say(b"started %d" % pid)

    def _end_call(self) -> None:
        """The program exited: what it left behind is killed, then its status is told."""
        self._clear()
        status = self.status if self.status is not None else 9  # killed, never reaped
        self.call = self.status = None
        self._refresh_tmp()
        self._say(b"exit %d" % status)

    def _say(self, line: bytes) -> None:
        _quietly(self.control.sendall, line + b"\n")  # gone: its EOF ends the loop

    # -- processes -------------------------------------------------------------------------

    def _reap(self) -> bool:
        """Reap every child that has exited; False once there is no child left at all."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.call:
                self.status = status

    def _clear(self) -> None:
        """Kill every process below the warden and reap them all (see the module docstring).

        No child left means nothing below is left: every orphan comes back to the warden."""
        deadline = time.monotonic() + _CLEAR_GRACE_S
        while self._reap() and time.monotonic() < deadline:
            self._kill_all()
            select.select([self.wake], [], [], 0.05)
            self._drain()

    def _kill_all(self) -> None:
        if self.pid1:
            _quietly(os.kill, -1, _signal.SIGKILL)  # every process of the namespace but this
            return
        below = _descendants(os.getpid())
        family = {os.getpid(), *below}
        for pid in below:
            try:
                handle = os.pidfd_open(pid)
            except OSError:
                continue  # gone already
            try:
                if _parent(pid) in family:  # still below: not a recycled pid
                    _signal.pidfd_send_signal(handle, _signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(handle)

    def _refresh_tmp(self) -> None:
        """Inside the sandbox: empty the private /tmp and make HOME again for the next call,
        never crossing into a mount (the work tree may be bound below /tmp)."""
        if self.home is None:
            return
        _empty("/tmp", os.lstat("/tmp").st_dev)
        os.makedirs(self.home, exist_ok=True)

    def _drain(self) -> None:
        try:
            while os.read(self.wake, 512):
                pass
        except BlockingIOError:
            pass


def _quietly(call: Callable[..., object], *args: object) -> OSError | None:
    """``call(*args)``, an ``OSError`` returned rather than raised (``contextlib`` would
    cost the warden's start-up more than its own code)."""
    try:
        call(*args)
    except OSError as exc:
        return exc
    return None


def _candidates(program: bytes, env: dict[bytes, bytes]) -> list[bytes]:
    """Where ``program`` may be, in the order ``execvp`` tries, on the call's own PATH."""
    if b"/" in program:
        return [program]
    path = env.get(b"PATH", os.defpath.encode())
    return [os.path.join(folder or b".", program) for folder in path.split(b":")]


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return int(handle.read().rsplit(b")", 1)[1].split()[1])


def _descendants(root: int) -> list[int]:
    """Every process below ``root``, from the parent links in ``/proc``."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                children.setdefault(_parent(int(name)), []).append(int(name))
            except (OSError, ValueError, IndexError):
                continue  # exited while /proc was read
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _empty(folder: str, device: int) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_dev != device:
                continue  # a mount point: the work tree or a read-only path
            if entry.is_dir(follow_symlinks=False):
                _empty(entry.path, device)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue  # a folder holding a mount point stays


def main(argv: list[str]) -> int:
    import ctypes

    control = int(argv[1])
    os.set_inheritable(control, False)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if os.getpid() != 1 and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os.write(2, b"warden: cannot become a child subreaper\n")
        return 70
    # As PID 1, a signal without a handler is dropped: SIGINT must not raise in here.
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    sock = _socket.socket(fileno=control)
    Warden(sock, argv[2] if len(argv) > 2 else None).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
