"""Serve an embedded forge over smart HTTP: plain requests in process, git for the rest.

The server answers only for the one repository it was given (``/<name>/...``) and only the
two smart-HTTP services, ``git-upload-pack`` and ``git-receive-pack`` (pushes enabled).
The ref advertisements and protocol v2 ``ls-refs`` are answered in process
(:mod:`assay.forge.smarthttp`), and so are a plain push (:mod:`assay.forge.receivepack`)
and a plain v2 fetch (:mod:`assay.forge.uploadpack`). Any other fetch or push starts
``git upload-pack`` or ``git receive-pack --stateless-rpc`` directly, with the environment
``git http-backend`` would give it, so the forge's hooks run as before, except that the
server, not each push, runs ``git gc --auto`` (every ``gc_every`` accepted pushes), and
that a push which can only lose its compare-and-swap is refused in process, in
receive-pack's own words. Request bodies are spooled through a temporary file
(de-chunked and un-gzipped); responses stream from the service as it writes.
Connections are served by a fixed pool of workers, and a client silent for the idle
timeout (or slower than it over its request line and headers) is dropped
(:mod:`assay.forge.connections`). It binds to 127.0.0.1 unless told otherwise; port 0
picks a free port.

A forge with a token file (:mod:`assay.forge.principals`) answers a request without a
valid ``Authorization: Bearer`` token with 401 (fetches may be let through with
``anonymous_read``), and every push's command list is checked against the pusher's role
before anything is unpacked or any ref moves, whichever path then takes it; a refused
push hears receive-pack's own report, naming the role and the rule.

A forge whose settings record sets a push budget (``pushes_per_minute``) has every push
that could move a ref wait for its place in it (:mod:`assay.forge.budget`), after the push
rule and the stale check and before anything is taken; a waiting push whose client asked
for side bands hears a line on band 2 and then keep-alives, so it is never taken for dead.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs

from assay.errors import AssayError, BadInput
from assay.forge import (
    budget,
    connections,
    principals,
    receivepack,
    reflocks,
    smarthttp,
    uploadpack,
)
from assay.forge.embedded import is_forge
from assay.plumbing import ZERO_SHA, config_env
from assay.refs import CLAIMS

LOG = logging.getLogger("assay.forge.serve")

# An ls-refs request is a few hundred bytes; one this large is not a client's.
MAX_COMMAND_BODY = 1 << 20
# receive-pack would start `git gc --auto` after every push (a whole git start-up that
# finds nothing to do on all but a few): the server runs it itself every GC_EVERY
# accepted pushes, in the background, one at a time (docs/forge.md).
SERVICE_CONFIG = {"receive-pack": {"receive.autogc": "false"}}
GC_EVERY = 50
GC_CONFIG = {"gc.autoDetach": "false"}  # its thread waits for it, and so can stop()
GC_TIMEOUT_S = 3600
NO_CACHE = (
    ("Expires", "Fri, 01 Jan 1980 00:00:00 GMT"),
    ("Pragma", "no-cache"),
    ("Cache-Control", "no-cache, max-age=0, must-revalidate"),
)


class _Refused(Exception):
    """A request answered with an HTTP error (status, reason) and nothing else."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _Unauthorized(_Refused):
    """401 with ``WWW-Authenticate: Bearer``, so git says it was an authentication failure."""

    def __init__(self, reason: str) -> None:
        super().__init__(401, reason)


class _Server(HTTPServer):
    """The listening socket, its connections served by a bounded pool
    (:mod:`assay.forge.connections`) instead of a thread each."""

    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], forge: ForgeServer) -> None:
        self.forge = forge
        super().__init__(address, _Handler)
        self.pool = connections.Pool(
            self.socket,
            self._handle,
            workers=forge.max_connections,
            idle_timeout=forge.idle_timeout,
            on_drop=lambda: forge.count("dropped"),
        )

    def _handle(self, sock: Any, address: Any) -> None:
        self.finish_request(sock, address)  # the pool logs a failure and closes the socket

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self.pool.serve_forever()

    def shutdown(self) -> None:
        self.pool.shutdown()

    def server_close(self) -> None:
        self.pool.close()
        super().server_close()


class _Deadline:
    """The request's reader while its request line and headers are read: every read's
    timeout is what is left of ``seconds`` from the first, so a client that sends its
    headers a byte at a time is dropped as one that sends nothing is."""

    def __init__(self, raw: Any, sock: Any, seconds: float) -> None:
        self.raw = raw
        self.sock = sock
        self.deadline = time.monotonic() + seconds

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's headers took too long")
        self.sock.settimeout(left)

    def readline(self, limit: int = -1) -> bytes:
        self._arm()
        return bytes(self.raw.readline(limit))

    def read(self, size: int = -1) -> bytes:
        self._arm()
        return bytes(self.raw.read(size))


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"
    principal: principals.Principal | None = None  # None: an open forge or an anonymous read
    begun = False  # the answer's status line and headers are sent (a waiting push's are)
    # Buffered: the headers leave with the body (or the first chunk) in one send, and
    # _stream flushes each chunk the service writes.
    wbufsize = 1 << 16

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.forge.idle_timeout)  # every read and write

    def handle_one_request(self) -> None:
        """One request (HTTP/1.0: one per connection), its request line and headers read
        within the idle timeout in all (a timeout there is the base class's to log)."""
        raw = self.rfile
        self.rfile = _Deadline(raw, self.connection, self.server.forge.idle_timeout)  # type: ignore[assignment]
        try:
            super().handle_one_request()
        finally:
            self.rfile = raw

    def _headers_read(self) -> None:
        """From here (the body, the answer) the idle timeout is per read and write."""
        if isinstance(self.rfile, _Deadline):
            self.rfile = self.rfile.raw
        self.connection.settimeout(self.server.forge.idle_timeout)

    def do_GET(self) -> None:
        self._answer(self._advertise)

    def do_POST(self) -> None:
        self._answer(self._rpc)

    def _answer(self, route: Callable[[str], None]) -> None:
        self._headers_read()
        self.begun = False
        path, _, self.query = self.path.partition("?")
        prefix = f"/{self.server.forge.name}/"
        try:
            if not path.startswith(prefix) or ".." in path:
                raise _Refused(404, "no such repository")
            self._authenticate(path[len(prefix) :])
            route(path[len(prefix) :])
        except _Unauthorized as refused:
            self._send_unauthorized(refused.reason)
        except _Refused as refused:
            self._error(refused.status, refused.reason)
        except BadInput as exc:
            self._error(400, str(exc).splitlines()[0][:200])
        except (BrokenPipeError, ConnectionResetError):
            LOG.debug("client %s hung up", self.address_string())
        except TimeoutError:
            idle = self.server.forge.idle_timeout
            LOG.debug("client %s was silent for %s s", self.address_string(), idle)
            self.close_connection = True
        except Exception:  # one request's bug must not take the server down
            LOG.exception("forge serve: %s %s failed", self.command, path)
            self._error(500, "the forge server failed on this request")

    def _error(self, status: int, reason: str) -> None:
        """An HTTP error, unless the answer has begun (a waited push): then the client
        hears an answer cut short, which it retries as a transport failure."""
        if self.begun:
            LOG.warning("forge serve: %s after the answer began: %s", status, reason)
            self.close_connection = True
            return
        self.send_error(status, reason)

    def _authenticate(self, rest: str) -> None:
        """Who sent this request (``self.principal``), or 401 when the forge has tokens and
        the request bears none of them (a fetch may go without with ``anonymous_read``)."""
        forge = self.server.forge
        self.principal = None
        if forge.tokens.open:
            return
        header = self.headers.get("Authorization")
        if header is not None:
            self.principal = forge.tokens.principal(header)
            if self.principal is None:
                forge.count("unauthorized")
                raise _Unauthorized("the token is not one of this forge's")
            return
        service = (
            rest if self.command == "POST" else (parse_qs(self.query).get("service") or [""])[0]
        )
        if forge.anonymous_read and service == smarthttp.UPLOAD_PACK:
            return
        forge.count("unauthorized")
        raise _Unauthorized("this forge needs a token (Authorization: Bearer)")

    def _send_unauthorized(self, reason: str) -> None:
        body = f"{reason}\n".encode()
        self.send_response(401, reason)
        for key, value in (
            *NO_CACHE,
            ("WWW-Authenticate", 'Bearer realm="assay"'),
            ("Content-Type", "text/plain"),
        ):
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _protocol(self) -> str:
        return self.headers.get("Git-Protocol", "")

    def _advertise(self, rest: str) -> None:
        if rest != "info/refs":
            raise _Refused(404, "not a smart-HTTP path")
        service = (parse_qs(self.query).get("service") or [""])[0]
        if service not in smarthttp.SERVICES:
            raise _Refused(403, "only git-upload-pack and git-receive-pack are served")
        refs = self.server.forge.refs
        body: bytes | None = None
        if service == smarthttp.UPLOAD_PACK and smarthttp.protocol_version(self._protocol()) == 2:
            body = refs.upload_pack_v2  # v2 starts with the capabilities, no service line
        elif (
            service == smarthttp.RECEIVE_PACK and smarthttp.protocol_version(self._protocol()) == 0
        ):
            advertised = refs.receive_pack_advertisement()
            if advertised is not None:
                body = smarthttp.service_line(service) + advertised
        if body is None:  # a v0 fetch or a v1 client: git advertises, still without a CGI
            self._spawn(service, None, advertise=True)
            return
        self._send(200, f"application/x-{service}-advertisement", body)

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        for key, value in (*NO_CACHE, ("Content-Type", content_type)):
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _rpc(self, rest: str) -> None:
        if rest not in smarthttp.SERVICES:
            raise _Refused(404, "not a smart-HTTP path")
        service = rest
        if self.headers.get("Content-Type", "") != f"application/x-{service}-request":
            raise _Refused(415, f"a {service} request must be application/x-{service}-request")
        with tempfile.TemporaryFile() as raw:
            self._read_body(raw)
            raw.seek(0)
            with self._decoded(raw) as body:
                self._serve_body(service, body)

    def _serve_body(self, service: str, body: IO[bytes]) -> None:
        """Answer a decoded request body: ls-refs, a plain fetch and a plain push here, the
        rest by git."""
        command = self._v2_command(service, body)
        if command == "ls-refs":
            answer = self.server.forge.refs.ls_refs(smarthttp.parse_command(self._small(body)))
            self._send(200, f"application/x-{service}-result", answer)
            return
        if command == "fetch" and self._fetched_in_process(service, body):
            return
        extra: dict[str, str] = {}
        if service == smarthttp.RECEIVE_PACK:
            head = body.read(smarthttp.MAX_PUSH_HEAD)
            body.seek(0)
            allowed = self._authorized(head, body)
            if allowed is None:
                return
            extra = allowed
            request = smarthttp.parse_push(head)  # read once: None when not a plain push
            self._clear_stale_locks(smarthttp.pushed_refs(head))
            if not extra and self._refused_in_process(request):
                return
            listed = smarthttp.command_request(head)
            if listed is not None and listed.commands:
                self._budgeted_push(listed, request, body, extra)
                return
        self._spawn_on(service, body, extra)

    def _spawn_on(self, service: str, body: IO[bytes], extra: dict[str, str]) -> None:
        # The child reads the file descriptor itself: a buffered seek(0) may never move it.
        body.flush()
        os.lseek(body.fileno(), 0, os.SEEK_SET)
        self._spawn(service, body, advertise=False, config=extra)

    def _budgeted_push(
        self,
        listed: smarthttp.PushRequest,
        request: smarthttp.PushRequest | None,
        body: IO[bytes],
        extra: dict[str, str],
    ) -> None:
        """Take a push that may move refs once the forge's push budget has room for it
        (:mod:`assay.forge.budget`), and count it there when it moved one."""
        forge = self.server.forge
        with forge.push_budget().slot(lambda: self._keep_waiting(listed)) as slot:
            if slot.throttled:
                forge.count("throttled")
            if not extra and self._received_in_process(request, body):
                slot.moved = self._moved(listed)
            else:
                self._spawn_on(smarthttp.RECEIVE_PACK, body, extra)
                slot.moved = self._moved(listed)
            if slot.moved and slot.limit:
                forge.count("budgeted")

    def _moved(self, listed: smarthttp.PushRequest) -> bool:
        """Whether the push left any of its refs at the value it asked for."""
        with self.server.forge.refs.repository() as repo:
            return any(smarthttp.ref_value(repo, c.ref) == c.new for c in listed.commands)

    def _keep_waiting(self, listed: smarthttp.PushRequest) -> None:
        """While a push waits for the budget: to a client that asked for side bands, the
        answer's headers and a line on band 2 at once, then an empty band-1 packet (what
        receive-pack itself sends as a keep-alive) each time. A client without side bands
        hears nothing until the push is taken."""
        if not listed.asks("side-band-64k"):
            return
        if not self.begun:
            self._begin(f"application/x-{smarthttp.RECEIVE_PACK}-result")
            limit = self.server.forge.push_budget()
            said = (
                f"the forge's push budget ({limit.limit} per {limit.window:g} s) is spent: "
                "this push waits for its turn\n"
            )
            self._write(smarthttp.sideband(2, said.encode()))
            return
        self._write(b"0005\x01")

    def _authorized(self, head: bytes, body: IO[bytes]) -> dict[str, str] | None:
        """Check a push against the pusher's role (:func:`principals.refusal`) before
        anything of it is taken. None: refused (the report is sent). Otherwise the config
        receive-pack must run with: ``receive.denyNonFastForwards`` when a guarded ref's
        update could not be told a fast-forward here, so git refuses it if it is not."""
        principal = self.principal
        if principal is None or principal.role == "admin":
            return {}
        request = smarthttp.command_request(head)
        if request is None:
            raise _Refused(403, f"role {principal.role}: a push this server cannot check")
        forge = self.server.forge
        objects: dict[str, Any] | None = None
        unknown = False
        reasons: list[str | None] = []
        # The claims as this push would leave them: a desk's claim and its branch travel in
        # one atomic push when it takes a brief.
        claims_after = {c.ref: c.new for c in request.commands if c.ref.startswith(CLAIMS)}
        with forge.refs.repository() as repo:
            for command in request.commands:

                def fast_forward(command: smarthttp.PushCommand = command) -> bool | None:
                    nonlocal objects, unknown
                    if objects is None:
                        objects = receivepack.pushed_objects(request, body, repo)
                    answer = principals.is_fast_forward(repo, objects, command.old, command.new)
                    unknown = unknown or answer is None
                    return answer

                def claim_desk(command: smarthttp.PushCommand = command) -> str | None:
                    nonlocal objects
                    if objects is None:
                        objects = receivepack.pushed_objects(request, body, repo)
                    return principals.claim_desk(repo, objects, command.new)

                def holder_of(brief: str) -> str | None:
                    nonlocal objects
                    if objects is None:
                        objects = receivepack.pushed_objects(request, body, repo)
                    claim = claims_after.get(CLAIMS + brief)
                    if claim is None:
                        claim = smarthttp.ref_value(repo, CLAIMS + brief)
                    if not claim or claim == ZERO_SHA:
                        return None
                    return principals.claim_desk(repo, objects, claim)

                reasons.append(
                    principals.refusal(
                        principal,
                        command.old,
                        command.new,
                        command.ref,
                        fast_forward=fast_forward,
                        claim_desk=claim_desk,
                        holder_of=holder_of,
                    )
                )
        if any(reasons):
            forge.count("forbidden")
            said = "; ".join(r for r in reasons if r)
            LOG.info("push by %s (%s) refused: %s", principal.name, principal.role, said)
            answer = smarthttp.role_refusal(request, reasons)
            self._send(200, f"application/x-{smarthttp.RECEIVE_PACK}-result", answer)
            return None
        return {"receive.denyNonFastForwards": "true"} if unknown else {}

    def _v2_command(self, service: str, body: IO[bytes]) -> str | None:
        """The protocol v2 command a (decoded) upload-pack body starts with, or None;
        leaves ``body`` at its start."""
        if service != smarthttp.UPLOAD_PACK or smarthttp.protocol_version(self._protocol()) != 2:
            return None
        first = body.read(len(smarthttp.pkt_line(b"command=ls-refs\n")))  # the longer name
        body.seek(0)
        return smarthttp.command_name(first)

    def _fetched_in_process(self, service: str, body: IO[bytes]) -> bool:
        """Answer a v2 ``fetch`` here, when it is plain, instead of starting upload-pack
        (:mod:`assay.forge.uploadpack`); False, with ``body`` at its start, when git must."""
        data = body.read(MAX_COMMAND_BODY + 1)
        body.seek(0)
        if len(data) > MAX_COMMAND_BODY:
            return False
        try:
            command = smarthttp.parse_command(data)
        except BadInput:
            return False  # upload-pack's to refuse, in its words
        forge = self.server.forge
        refs = forge.refs
        with refs.repository() as repo:
            answer = uploadpack.fetch_answer(
                forge.path,
                repo,
                command,
                may_serve=lambda oids: refs.may_serve(repo, oids),
                config=refs.config(),
            )
        if answer is None:
            return False
        forge.count("fetched")
        self._send(200, f"application/x-{service}-result", answer)
        return True

    def _clear_stale_locks(self, pushed: list[str]) -> None:
        """Remove the locks a killed receive-pack left on the ``pushed`` refs, deletions
        included (:mod:`assay.forge.reflocks`)."""
        for lock in reflocks.clear_stale(self.server.forge.path, pushed):
            self.server.forge.count("stale-lock")
            LOG.warning("removed %s: its writer died inside the ref transaction", lock)

    def _refused_in_process(self, request: smarthttp.PushRequest | None) -> bool:
        """Answer a push that can only lose its compare-and-swap without receive-pack
        (``RefServer.refuse_stale_push``)."""
        if smarthttp.protocol_version(self._protocol()) != 0:
            return False
        answer = self.server.forge.refs.refuse_stale_push(request)
        if answer is None:
            return False
        self.server.forge.count("refused")
        self._send(200, f"application/x-{smarthttp.RECEIVE_PACK}-result", answer)
        return True

    def _received_in_process(self, request: smarthttp.PushRequest | None, body: IO[bytes]) -> bool:
        """Take a plain push here instead of starting receive-pack
        (:mod:`assay.forge.receivepack`); False, with nothing moved, when git must."""
        forge = self.server.forge
        refs = forge.refs
        if request is None or smarthttp.protocol_version(self._protocol()) != 0:
            return False
        if not refs.plain_push(request) or not receivepack.takes_pushes(forge.path, refs.config()):
            return False
        data = body.read(receivepack.MAX_BODY + 1)
        body.seek(0)
        if len(data) > receivepack.MAX_BODY:
            return False
        with refs.repository() as repo:
            received = receivepack.receive(forge.path, repo, request, data)
        if received is None:
            return False
        forge.count("received" if received.updated else "refused")
        self._begin(f"application/x-{smarthttp.RECEIVE_PACK}-result")
        self._write(received.answer)
        if not received.updated:
            return True  # lost at the lock: no hook, nothing to collect
        env = smarthttp.service_env(remote_addr=self.client_address[0], git_protocol="")
        said = receivepack.run_post_receive(forge.path, received.updated, env)
        if received.side_band:
            self._write(received.closing(said))
        elif said:
            LOG.info("post-receive: %s", said.decode("utf-8", "replace").strip()[-2000:])
        forge.pushed()
        return True

    def _begin(self, content_type: str) -> None:
        """The headers of an answer streamed as it is made: HTTP/1.0, so its body ends when
        the connection closes. Sent once: a waited push's were sent while it waited."""
        if self.begun:
            return
        self.begun = True
        self.send_response(200)
        for key, value in (*NO_CACHE, ("Content-Type", content_type)):
            self.send_header(key, value)
        self.end_headers()

    def _write(self, data: bytes) -> None:
        """Write and flush to the client; a client that hung up is not waited for (a push
        goes on to its hook either way)."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            LOG.debug("client %s hung up before the push's answer", self.address_string())

    @staticmethod
    def _small(body: IO[bytes]) -> bytes:
        data = body.read(MAX_COMMAND_BODY + 1)
        if len(data) > MAX_COMMAND_BODY:
            raise _Refused(413, f"a command request over {MAX_COMMAND_BODY} bytes")
        return data

    def _read_body(self, sink: IO[bytes]) -> None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self._read_chunked(sink)
            return
        try:
            remaining = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise _Refused(400, "Content-Length is not a number") from None
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 16))
            if not chunk:
                raise _Refused(400, "the request body ended before its Content-Length")
            sink.write(chunk)
            remaining -= len(chunk)

    def _read_chunked(self, sink: IO[bytes]) -> None:
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _Refused(400, "a malformed chunk of a chunked body") from None
            if size < 0:
                raise _Refused(400, "a malformed chunk of a chunked body")
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return
            chunk = self.rfile.read(size)
            if len(chunk) < size:
                raise _Refused(400, "the chunked body ended inside a chunk")
            sink.write(chunk)
            self.rfile.readline(1024)

    @contextmanager
    def _decoded(self, raw: IO[bytes]) -> Iterator[IO[bytes]]:
        """The request body un-gzipped into a second temporary file (``raw`` itself when
        it was not encoded), at its start."""
        encoding = self.headers.get("Content-Encoding", "").strip().lower()
        if encoding in ("", "identity"):
            yield raw
            return
        if encoding not in ("gzip", "x-gzip"):
            raise _Refused(415, f"Content-Encoding {encoding[:40]!r} is not served")
        with tempfile.TemporaryFile() as body:
            try:
                with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                    shutil.copyfileobj(unzipped, body)
            except (OSError, EOFError, zlib.error):
                raise _Refused(400, "the gzip request body does not decode") from None
            body.seek(0)
            yield body

    def _spawn(
        self,
        service: str,
        body: IO[bytes] | None,
        *,
        advertise: bool,
        config: dict[str, str] | None = None,
    ) -> None:
        """Start the service on the spooled body and stream what it writes to the client
        (``config``: settings for this one run of it, besides :data:`SERVICE_CONFIG`)."""
        forge = self.server.forge
        args = [forge.git, service.removeprefix("git-"), "--stateless-rpc"]
        args += ["--advertise-refs", "."] if advertise else ["."]
        env = smarthttp.service_env(
            remote_addr=self.client_address[0], git_protocol=self._protocol()
        )
        settings = {**SERVICE_CONFIG.get(args[1], {}), **(config or {})}
        if settings:
            env.update(config_env(settings))
        forge.count(args[1])
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                args,
                cwd=forge.path,
                stdin=body if body is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=env,
                bufsize=0,  # reads return what the service has written so far
            )
            assert proc.stdout is not None
            try:
                code = self._stream(proc, service, advertise=advertise, errors=errors)
            finally:
                proc.stdout.close()
                proc.wait()
        if service == smarthttp.RECEIVE_PACK and not advertise and code == 0:
            forge.pushed()

    def _stream(
        self, proc: subprocess.Popen[bytes], service: str, *, advertise: bool, errors: IO[bytes]
    ) -> int:
        assert proc.stdout is not None
        first = proc.stdout.read(1 << 16)
        if not first and proc.wait() != 0:
            errors.seek(0)
            said = errors.read(2000).decode("utf-8", "replace").strip().splitlines()
            LOG.warning("%s: %s", service, said[-1] if said else f"exit {proc.returncode}")
            raise _Refused(400, f"{service} refused the request")
        kind = "advertisement" if advertise else "result"
        self._begin(f"application/x-{service}-{kind}")
        if advertise:
            self.wfile.write(smarthttp.service_line(service))
        chunk, listening = first, True
        while chunk:
            if listening:
                try:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError, TimeoutError):
                    # A push must finish (refs, then its post-receive hook) whether or not
                    # the pusher hears the report: drain it. A fetch nobody reads can stop.
                    if service != smarthttp.RECEIVE_PACK or advertise:
                        raise
                    listening = False
            chunk = proc.stdout.read(1 << 16)
        return proc.wait()


class ForgeServer:
    """A smart-HTTP server for one embedded forge; use as a context manager or ``start()``.

    ``on_push`` (optional) is called after every accepted push, from a server thread.
    ``max_connections`` requests are served at once (worker threads); a client silent for
    ``idle_timeout`` seconds, or slower than that over its request line and headers, is
    dropped (:mod:`assay.forge.connections`). When the forge has a token file, requests
    need a token (``anonymous_read``: fetches need none) and pushes are checked against
    the token's role (:mod:`assay.forge.principals`). The forge's push budget is read
    from its settings record when the server starts and again whenever that ref moves;
    ``budget_window`` is its window in seconds (default: ``$ASSAY_FORGE_BUDGET_WINDOW_SECONDS``,
    else 60; :mod:`assay.forge.budget`).
    """

    def __init__(
        self,
        path: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        on_push: Callable[[], None] | None = None,
        gc_every: int = GC_EVERY,
        max_connections: int = connections.MAX_CONNECTIONS,
        idle_timeout: float = connections.IDLE_TIMEOUT_S,
        anonymous_read: bool = False,
        budget_window: float | None = None,
    ) -> None:
        self.path = Path(path).expanduser().resolve()
        if not is_forge(self.path):
            raise BadInput(f"forge serve {path}: not an Assay forge (run `assay forge init` first)")
        if gc_every < 1:
            raise BadInput(f"forge serve {path}: gc_every must be at least 1, not {gc_every}")
        if max_connections < 1:
            raise BadInput(
                f"forge serve {path}: max_connections must be at least 1, not {max_connections}"
            )
        if not idle_timeout > 0:
            raise BadInput(f"forge serve {path}: idle_timeout must be over 0 s, not {idle_timeout}")
        self.max_connections = max_connections
        # Read afresh when the file changes: a token revoked is refused at once.
        self.tokens = principals.Tokens(self.path)
        self.tokens.entries()  # a malformed token file stops the server from starting
        self.anonymous_read = anonymous_read
        self.idle_timeout = float(idle_timeout)
        self.name = self.path.name
        # Found once: each service started by name would try every PATH entry in turn.
        self.git = shutil.which("git") or "git"
        self.refs = smarthttp.RefServer(self.path).start()
        from assay.forge import settings  # it reads keys of assay.evidence, which reads it

        window = budget.window_from_env() if budget_window is None else budget_window
        # A malformed settings record stops the server from starting, as a token file does.
        self._settings_tip = settings.local_settings_tip(self.path)
        limit = settings.read_local_settings(self.path, self._settings_tip).pushes_per_minute
        self.budget = budget.PushBudget(limit, window=window)
        self._settings_lock = threading.Lock()
        self.on_push = on_push
        # What the requests served so far started, by process name (``upload-pack``,
        # ``receive-pack``, ``gc``), the pushes ``refused`` in process, and, under a push
        # budget, those it counted (``budgeted``: they moved refs) and those that waited for
        # it (``throttled``): the server's own cost, read by tests and benchmarks. Every
        # push that moved refs, budget or not, is in ``budget.landed``.
        self.started: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self.gc_every = gc_every
        self._pushes = 0
        self._gc: threading.Thread | None = None
        self._server = _Server((host, port), self)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The URL clients pass to ``--forge``."""
        return f"http://{self.host}:{self.port}/{self.name}"

    def push_budget(self) -> budget.PushBudget:
        """The budget, its limit re-read when ``refs/assay/config`` has moved (an admin's
        ``assay forge settings``); a record gone bad keeps the last good limit."""
        from assay.forge import settings

        tip = settings.local_settings_tip(self.path)
        with self._settings_lock:
            if tip != self._settings_tip:
                try:
                    limit = settings.read_local_settings(self.path, tip).pushes_per_minute
                except AssayError as exc:
                    LOG.warning("forge settings: %s (the push budget is unchanged)", exc)
                else:
                    self.budget.set_limit(limit)
                self._settings_tip = tip
        return self.budget

    def count(self, process: str) -> None:
        with self._count_lock:
            self.started[process] += 1

    def pushed(self) -> None:
        if self.on_push is not None:
            try:
                self.on_push()
            except Exception:  # a hook must never take the server down
                LOG.exception("on_push hook failed")
        self._maybe_collect()

    def _maybe_collect(self) -> None:
        """Start ``git gc --auto`` in the background every ``gc_every`` accepted pushes,
        unless the last one is still running (git decides whether there is work)."""
        with self._count_lock:
            self._pushes += 1
            if self._pushes % self.gc_every or (self._gc is not None and self._gc.is_alive()):
                return
            self._gc = threading.Thread(target=self._collect, name="forge-gc", daemon=True)
            self._gc.start()

    def _collect(self) -> None:
        self.count("gc")
        env = {**smarthttp.service_env(remote_addr="", git_protocol=""), **config_env(GC_CONFIG)}
        try:
            done = subprocess.run(
                [self.git, "gc", "--auto", "--quiet"],
                cwd=self.path,
                env=env,
                capture_output=True,
                timeout=GC_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            LOG.warning("forge gc: %s", exc)
            return
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            LOG.warning("forge gc: %s", said[-1] if said else f"exit {done.returncode}")

    def start(self) -> ForgeServer:
        """Serve from a background thread and return at once."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"forge-serve-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until ``stop()`` (or a signal) ends it."""
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        gc = self._gc
        if gc is not None:
            gc.join(timeout=30)  # a collection under way finishes rather than being orphaned

    def __enter__(self) -> ForgeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
