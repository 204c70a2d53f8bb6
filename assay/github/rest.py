"""The GitHub REST boundary: one httpx client that respects GitHub's limits by construction.

- Every GET is conditional: the ETag of the last answer for that URL is sent back as
  ``If-None-Match`` and a 304 reuses the cached body (a 304 does not count against the
  primary rate limit). The ETag cache can persist to a file so separate desk processes share it.
- 429s and 403 rate limits (primary: ``x-ratelimit-remaining: 0``; secondary: the message
  says so) are waited out with tenacity, honouring ``retry-after`` and ``x-ratelimit-reset``;
  a wait longer than ``max_wait_s`` gives up at once with ``ForgeUnavailable``.
- Every wait of one client adds up to at most ``max_total_wait_s`` (default 300 s, under the
  shortest workflow timeout; ``ASSAY_GITHUB_MAX_TOTAL_WAIT``): past it the client gives up
  with ``ForgeUnavailable`` instead of being killed by the runner half way through. The
  forge's push-budget waits are charged to the same total (``charge_wait``), so one
  command's REST retries and push waits together stay under its job's timeout.
- Writes are serial and spaced (GitHub asks for one mutating request at a time, a second
  apart, to stay under the secondary limits); the spacing is a parameter so tests stay fast.
- A POST that creates something is never sent twice blindly: a 5xx or a dropped connection
  does not say whether GitHub made it, so the caller's ``reconcile`` re-reads (finds the
  comment by its marker, the pull request by its head) and only a miss is sent again; without
  ``reconcile`` such a POST is ``WriteUncertain`` (exit 69). A rate limit (429, 403) is
  GitHub's word that nothing was done, and is waited out and retried as before.
- ``RestStats`` counts every call; each client adds to its own counter and to the process-wide
  one that commands report in their ``--json`` output (``process_stats()``).

HTTP failures are translated here, at the boundary, into the error tree.
"""

from __future__ import annotations

import email.utils
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from assay import __version__
from assay.errors import BadInput, Denied, Failed, ForgeUnavailable

DEFAULT_WRITE_SPACING_S = 1.0
DEFAULT_MAX_WAIT_S = 900.0
DEFAULT_MAX_TOTAL_WAIT_S = 300.0  # the shortest workflow timeout is 10 minutes
SECONDARY_WAIT_S = 60.0  # GitHub: without retry-after, wait at least a minute
_WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})


class GitHubDenied(Denied):
    """401, or a 403 that is not a rate limit: the token may not do this."""


class GitHubNotFound(BadInput):
    """404: the repository, issue, pull request or workflow named does not exist."""


class GitHubRefused(Failed):
    """GitHub understood the request and refused it (405, 409, 422)."""


class WriteUncertain(ForgeUnavailable):
    """A create failed in a way that does not say whether GitHub made it (a 5xx, a dropped
    connection) and could not be reconciled: it is not sent again blindly."""


@dataclass
class RestStats:
    """What a client (or the whole process) asked of GitHub."""

    calls: int = 0  # requests sent, including 304s and retried attempts
    charged: int = 0  # of those, the ones that count against the primary rate limit
    not_modified: int = 0
    writes: int = 0
    retries: int = 0
    reconciled: int = 0  # creates found made after an answer that did not say so (not in JSON)
    waited_s: float = 0.0

    def add(self, **deltas: float) -> None:
        for key, value in deltas.items():
            setattr(self, key, getattr(self, key) + value)

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "charged": self.charged,
            "not_modified": self.not_modified,
            "writes": self.writes,
            "retries": self.retries,
            "waited_s": round(self.waited_s, 3),
        }


_PROCESS_STATS = RestStats()
_PROCESS_LOCK = threading.Lock()


def process_stats() -> RestStats:
    """REST calls made by every client in this process (for a command's ``--json``)."""
    return _PROCESS_STATS


class _RateLimited(Exception):
    def __init__(self, response: httpx.Response, wait_s: float) -> None:
        super().__init__(f"rate limited ({response.status_code}), retry in {wait_s:.1f}s")
        self.response = response
        self.wait_s = wait_s


class _Transient(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)


def rate_limit_wait(response: httpx.Response, *, now: float | None = None) -> float | None:
    """Seconds to wait before retrying ``response``, or None when it is not a rate limit."""
    status = response.status_code
    if status not in (403, 429):
        return None
    now = time.time() if now is None else now
    retry_after = response.headers.get("retry-after")
    if retry_after is not None:
        if retry_after.strip().isdigit():
            return float(retry_after)
        when = email.utils.parsedate_to_datetime(retry_after)
        return max(0.0, when.timestamp() - now)
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = float(response.headers.get("x-ratelimit-reset", now))
        return max(0.0, reset - now) + 1.0
    if status == 429 or "secondary rate limit" in _message(response).lower():
        return SECONDARY_WAIT_S
    return None


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    return str(body.get("message", "")) if isinstance(body, dict) else ""


class RestClient:
    """A GitHub REST client for one API root and token (see the module docstring)."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        write_spacing_s: float | None = None,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        max_total_wait_s: float | None = None,
        attempts: int = 6,
        etag_cache: Path | None = None,
        sleep: Callable[[float], None] = time.sleep,
        timeout_s: float = 30.0,
    ) -> None:
        if not token:
            raise BadInput("GitHub token is empty: set GITHUB_TOKEN (or the --token-env variable)")
        self.api_url = api_url.rstrip("/")
        self.graphql_url = graphql_url(self.api_url)
        if write_spacing_s is None:
            write_spacing_s = float(
                os.environ.get("ASSAY_GITHUB_WRITE_SPACING", DEFAULT_WRITE_SPACING_S)
            )
        self.write_spacing_s = write_spacing_s
        self.max_wait_s = max_wait_s
        if max_total_wait_s is None:
            max_total_wait_s = float(
                os.environ.get("ASSAY_GITHUB_MAX_TOTAL_WAIT", DEFAULT_MAX_TOTAL_WAIT_S)
            )
        self.max_total_wait_s = max_total_wait_s
        self.attempts = attempts
        self.stats = RestStats()
        self.waited_in_all_s = 0.0  # REST waits and the push waits charged to this client
        self._sleep = sleep
        self._etag_path = etag_cache
        self._etags: dict[str, tuple[str, Any]] = self._load_etags()
        self._write_lock = threading.Lock()
        self._last_write = 0.0
        self._http = httpx.Client(
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": f"assay/{__version__}",
            },
            timeout=timeout_s,
        )

    # -- public calls ----------------------------------------------------------------------

    def get(self, path: str, *, params: dict[str, Any] | None = None) -> Any:
        """GET ``path`` conditionally; a 304 returns the body cached with its ETag."""
        body, _ = self._get(self._url(path, params))
        return body

    def get_all(
        self, path: str, *, params: dict[str, Any] | None = None, limit: int = 1000
    ) -> list[Any]:
        """GET every page of a list (``per_page=100``), each page conditional."""
        url: str | None = self._url(path, {"per_page": 100, **(params or {})})
        items: list[Any] = []
        while url is not None and len(items) < limit:
            body, url = self._get(url)
            if not isinstance(body, list):
                raise GitHubRefused(f"GitHub answered {path} with a {type(body).__name__}")
            items.extend(body)
        return items

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        reconcile: Callable[[], Any] | None = None,
        replayable: bool = False,
    ) -> Any:
        """POST once. A 5xx or a dropped connection is retried only when the POST is
        ``replayable`` (adding a label: the same twice is the same), or after ``reconcile``
        (a re-read returning what the first POST made, or None) found nothing."""
        if replayable:
            return self._write("POST", path, body)
        for attempt in range(1, 3):
            try:
                return self._write("POST", path, body, transient_retry=False)
            except WriteUncertain:
                if reconcile is None or attempt == 2:
                    raise
                found = reconcile()
                if found is not None:
                    self._count(reconciled=1)
                    return found
        raise AssertionError("unreachable")  # pragma: no cover

    def patch(self, path: str, body: Any = None) -> Any:
        return self._write("PATCH", path, body)

    def put(self, path: str, body: Any = None) -> Any:
        return self._write("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self._write("DELETE", path, None)

    def graphql(
        self, query: str, variables: dict[str, Any], *, replayable: bool = True
    ) -> tuple[dict[str, Any], str]:
        """One GraphQL mutation request, serial and spaced like every other write: its
        ``data`` and the errors GitHub gave ("" for none). GitHub runs a request's
        mutations in order and a refused one leaves the others done, so the caller sees
        both. ``replayable`` (mutations that set a state: a body, ready, merged at one head)
        is sent again after a 5xx; otherwise an unclear answer is ``WriteUncertain``."""
        body = self._write(
            "POST",
            self.graphql_url,
            {"query": query, "variables": variables},
            transient_retry=replayable,
        )
        messages = "; ".join(str(e.get("message")) for e in body.get("errors") or [])
        data: dict[str, Any] = body.get("data") or {}
        return data, messages

    def close(self) -> None:
        self._save_etags()
        self._http.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _url(self, path: str, params: dict[str, Any] | None) -> str:
        url = path if path.startswith("http") else self.api_url + "/" + path.lstrip("/")
        if params:
            url += "?" + urlencode(sorted((k, str(v)) for k, v in params.items()))
        return url

    def _get(self, url: str) -> tuple[Any, str | None]:
        cached = self._etags.get(url)
        headers = {"If-None-Match": cached[0]} if cached else {}
        response = self._send("GET", url, None, headers=headers)
        following = response.links.get("next", {}).get("url")
        if response.status_code == 304 and cached is not None:
            return cached[1], following
        body = response.json() if response.content else None
        etag = response.headers.get("etag")
        if etag:
            self._etags[url] = (etag, body)
        return body, following

    def _write(self, method: str, path: str, body: Any, *, transient_retry: bool = True) -> Any:
        # One mutating request at a time, spaced, across every thread using this client.
        with self._write_lock:
            gap = self._last_write + self.write_spacing_s - time.monotonic()
            if gap > 0:
                self._sleep(gap)
            try:
                response = self._send(
                    method, self._url(path, None), body, transient_retry=transient_retry
                )
            finally:
                self._last_write = time.monotonic()
        self._count(writes=1)
        return response.json() if response.content else None

    def _send(
        self,
        method: str,
        url: str,
        body: Any,
        *,
        headers: dict[str, str] | None = None,
        transient_retry: bool = True,
    ) -> httpx.Response:
        retried = (_RateLimited, _Transient) if transient_retry else (_RateLimited,)
        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=self._wait,
            retry=retry_if_exception_type(retried),
            sleep=self._sleep_counted,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(method, url, body, headers or {})
        except _RateLimited as exc:
            raise ForgeUnavailable(
                f"GitHub rate limit: {method} {url} still limited after {self.attempts} attempts"
            ) from exc
        except _Transient as exc:
            if not transient_retry:
                raise WriteUncertain(
                    f"GitHub did not say whether {method} {url} was done ({exc}); "
                    "not sent again blindly"
                ) from exc
            raise ForgeUnavailable(f"GitHub unreachable: {method} {url}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, method: str, url: str, body: Any, headers: dict[str, str]) -> httpx.Response:
        content = None if body is None else json.dumps(body).encode()
        if content is not None:
            headers = {**headers, "Content-Type": "application/json"}
        try:
            response = self._http.request(method, url, content=content, headers=headers)
        except httpx.TransportError as exc:
            self._count(calls=1)
            raise _Transient(f"{type(exc).__name__}: {exc}") from exc
        self._count(
            calls=1,
            charged=0 if response.status_code == 304 else 1,
            not_modified=1 if response.status_code == 304 else 0,
        )
        if response.status_code < 300 or response.status_code == 304:
            return response
        wait = rate_limit_wait(response)
        if wait is not None:
            if wait > self.max_wait_s:
                raise ForgeUnavailable(
                    f"GitHub rate limit on {method} {url}: reset in {wait:.0f}s "
                    f"(over the {self.max_wait_s:.0f}s this client waits); nothing was lost"
                )
            raise _RateLimited(response, wait)
        if response.status_code >= 500:
            raise _Transient(f"HTTP {response.status_code}")
        raise _translate(method, url, response)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _RateLimited):
            return exc.wait_s
        return float(min(0.5 * 2 ** (state.attempt_number - 1), 8.0))

    def charge_wait(self, seconds: float, *, what: str = "GitHub") -> None:
        """Count a wait of ``seconds`` against this command's total (REST retries and
        push-budget waits alike), before it is waited; ``ForgeUnavailable`` (69) when it
        would take the command past ``max_total_wait_s``."""
        if self.waited_in_all_s + seconds > self.max_total_wait_s:
            raise ForgeUnavailable(
                f"{what}: another {seconds:.1f}s wait would take this command past its "
                f"{self.max_total_wait_s:g}s of waiting in all "
                f"(ASSAY_GITHUB_MAX_TOTAL_WAIT); nothing was lost"
            )
        self.waited_in_all_s += seconds

    def _sleep_counted(self, seconds: float) -> None:
        self.charge_wait(seconds)
        self._count(retries=1, waited_s=seconds)
        self._sleep(seconds)

    def _count(self, **deltas: float) -> None:
        self.stats.add(**deltas)
        with _PROCESS_LOCK:
            _PROCESS_STATS.add(**deltas)

    def _load_etags(self) -> dict[str, tuple[str, Any]]:
        if self._etag_path is None or not self._etag_path.exists():
            return {}
        try:
            raw = json.loads(self._etag_path.read_text(encoding="utf-8"))
            return {url: (entry[0], entry[1]) for url, entry in raw.items()}
        except (ValueError, TypeError, IndexError, AttributeError, KeyError):
            return {}  # a damaged cache only costs full requests

    def _save_etags(self) -> None:
        if self._etag_path is None:
            return
        self._etag_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._etag_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._etags), encoding="utf-8")
        os.replace(tmp, self._etag_path)


def graphql_url(api_url: str) -> str:
    """``https://api.github.com/graphql``, or ``https://HOST/api/graphql`` on Enterprise."""
    api_url = api_url.rstrip("/")
    if api_url.endswith("/api/v3"):
        return api_url[: -len("/v3")] + "/graphql"
    return api_url + "/graphql"


def _translate(method: str, url: str, response: httpx.Response) -> Exception:
    status = response.status_code
    message = f"GitHub {status} on {method} {url}: {_message(response)}"
    if status in (401, 403):
        return GitHubDenied(message, status=status)
    if status == 404:
        return GitHubNotFound(message, status=status)
    return GitHubRefused(message, status=status)
