"""The hardened HTTP client behind `GitHubSource`: GET with a per-read timeout plus an overall `Deadline` (a
watchdog cuts the socket), bounded retries with exponential backoff (5xx, 429, rate-limit 403, connection errors,
bodies a check rejects), ``Retry-After`` honoured up to ``backoff_cap_s``, bodies cut off at ``max_bytes``,
same-origin redirects only, and a token sent to its own origins only and scrubbed from every message."""

from __future__ import annotations

import email.utils
import http.client
import logging
import re
import socket
import threading
import time
from datetime import datetime, timezone
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from kernelindex_pipeline.ingest.sources.base import MiB, SourceError, one_line

log = logging.getLogger(__name__)

USER_AGENT = "kernelindex-pipeline"
MAX_REDIRECTS = 5

_INCOMPLETE = re.compile(r"IncompleteRead\((\d+) bytes read, (\d+) more expected\)")
_DIGITS = re.compile(r"[0-9]+")


class Transient(Exception):
    """A failure worth another attempt; the message is the one-line reason."""


class RetryAfter(Transient):
    def __init__(self, reason: str, wait_s: float | None):
        super().__init__(reason)
        self.wait_s = wait_s


class NotFound(SourceError):
    """HTTP 404: not retried."""


def display(url: str) -> str:
    """A URL fit for a message: no user info, no query string."""
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
    except ValueError:
        return "(an unparsable URL)"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def origin(url: str) -> tuple[str, str, int | None] | None:
    """Scheme, host and port of a URL (None when it does not parse): redirects and the token stay within one."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        return None
    return (scheme, (parts.hostname or "").lower(), port) if parts.hostname else None


def exception_reason(exc: BaseException) -> str:
    """A short reason for a requests exception (its text is often a nested repr of the whole pool)."""
    kind = type(exc).__name__
    if isinstance(exc, requests.Timeout):
        return f"timed out ({kind})"
    text = str(exc)
    incomplete = _INCOMPLETE.search(text)
    if incomplete:
        got, more = int(incomplete.group(1)), int(incomplete.group(2))
        return f"connection closed early: {got} of {got + more} bytes ({kind})"
    for marker in ("Connection reset", "Connection refused", "Connection aborted", "IncompleteRead",
                   "Remote end closed", "Name or service not known", "Read timed out"):
        if marker in text:
            return f"{marker.lower()} ({kind})"
    return f"{kind}: {one_line(text, 160)}"



class Deadline:
    """A point in time after which no request is started and the one in flight is cut off."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.at - time.monotonic()


_in_flight = threading.local()  # the watchdog of the request this thread is making, if any


class _WatchedConnectionMixin:
    """Tells the watchdog of the current thread's request which connection carries it."""

    def request(self, *args, **kwargs):
        watchdog = getattr(_in_flight, "watchdog", None)
        if watchdog is not None:
            watchdog.connection = self
        return super().request(*args, **kwargs)


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = type("_WatchedHTTPConnection", (_WatchedConnectionMixin, HTTPConnection), {})


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = type("_WatchedHTTPSConnection", (_WatchedConnectionMixin, HTTPSConnection), {})


class _WatchedAdapter(HTTPAdapter):
    """An adapter whose connections a `_Watchdog` can cut (direct and HTTP-proxy connections)."""

    _POOLS = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self._watch(self.poolmanager)

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        return self._watch(super().proxy_manager_for(proxy, **proxy_kwargs))

    def _watch(self, manager):
        if manager.pool_classes_by_scheme is urllib3.poolmanager.pool_classes_by_scheme:
            manager.pool_classes_by_scheme = self._POOLS
        return manager


class _Watchdog:
    """Shuts the socket of this thread's request down when the deadline passes: a per-read timeout never trips
    on a server that sends a byte now and then; this bounds the whole request, headers and body alike."""

    def __init__(self, deadline: Deadline):
        self.deadline = deadline
        self.connection: HTTPConnection | None = None
        self.fired = False
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="http-deadline", daemon=True)

    def __enter__(self) -> _Watchdog:
        _in_flight.watchdog = self
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        _in_flight.watchdog = None
        with self._lock:
            self._done.set()
        self._thread.join()

    def _run(self) -> None:
        if self._done.wait(max(0.0, self.deadline.remaining())):
            return
        while True:  # again until the request ends: the connection may be opening right now
            with self._lock:
                if self._done.is_set():
                    return
                self.fired = True
                sock = getattr(self.connection, "sock", None)
                if sock is not None:
                    try:
                        socket.socket.shutdown(sock, socket.SHUT_RDWR)
                    except OSError:
                        pass
            if self._done.wait(0.05):
                return


class HttpClient:
    """GET with retries and backoff, an overall deadline, a size cap, and same-host redirects only. The token
    goes to `token_origins` only (scheme, host, port); every message has it scrubbed."""

    def __init__(self, *, token: str = "", token_env: str = "", token_origins=(), timeout_s: float = 30,
                 max_retries: int = 5, backoff_s: float = 1.0, backoff_cap_s: float = 60.0,
                 max_bytes: int = 64 * MiB):
        self._token = token
        self.token_env = token_env
        self.token_origins = frozenset(token_origins)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_cap_s = backoff_cap_s
        self.max_bytes = max_bytes
        self.sleep = time.sleep  # replaceable, e.g. by tests that record the waits
        self._session = requests.Session()
        self._session.headers["User-Agent"] = USER_AGENT
        for prefix in ("http://", "https://"):
            self._session.mount(prefix, _WatchedAdapter())

    def close(self) -> None:
        self._session.close()

    def get(self, url: str, what: str, deadline: Deadline, *, headers: dict | None = None, check=None,
            not_modified_ok: bool = False,
            max_bytes: int | None = None) -> tuple[bytes, int, requests.structures.CaseInsensitiveDict]:
        """GET url until it gives a checked body (or 304 when allowed); SourceError after the retries or the deadline.
        `max_bytes` lowers the client's body size cap for this request."""
        cap = self.max_bytes if max_bytes is None else min(self.max_bytes, max_bytes)
        attempts = self.max_retries + 1
        reason = ""
        for attempt in range(attempts):
            if deadline.remaining() <= 0:
                raise self._out_of_time(what, reason, deadline, attempt)
            wait = None
            try:
                return self._attempt(url, what, deadline, headers or {}, check, not_modified_ok, cap)
            except RetryAfter as exc:
                reason, wait = str(exc), exc.wait_s
            except Transient as exc:
                reason = str(exc)
            if attempt + 1 < attempts:
                backoff = min(self.backoff_cap_s, self.backoff_s * 2**attempt)
                wait = backoff if wait is None else min(self.backoff_cap_s, max(wait, backoff))
                remaining = deadline.remaining()
                if wait >= remaining:
                    raise self._out_of_time(what, reason, deadline, attempt + 1, wait if remaining > 0 else None)
                log.warning("%s: %s; retrying in %.2fs (attempt %d of %d)",
                            self._scrub(what), self._scrub(reason), wait, attempt + 2, attempts)
                self.sleep(wait)
        raise SourceError(self._scrub(f"cannot fetch {what}: {reason} (after {attempts} attempts)"))

    def _out_of_time(self, what: str, reason: str, deadline: Deadline, attempts: int,
                     wait: float | None = None) -> SourceError:
        limit = f"the {deadline.seconds:g} s deadline ($KERNELINDEX_HTTP_DEADLINE_S)"
        if attempts == 0:
            return SourceError(f"cannot fetch {what}: {limit} passed before it was asked for")
        ending = f"a retry in {wait:g} s would pass {limit}" if wait is not None else f"{limit} passed"
        count = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        return SourceError(self._scrub(f"cannot fetch {what}: {reason}; {ending} (after {count})"))

    def _attempt(self, url, what, deadline, headers, check, not_modified_ok, cap):
        timeout = max(0.001, min(self.timeout_s, deadline.remaining()))
        with _Watchdog(deadline) as watchdog:
            try:
                response = self._get_same_origin(url, what, headers, timeout)
                with response:
                    status = response.status_code
                    if status == 304 and not_modified_ok:
                        body = b""
                    else:
                        if status != 200:
                            self._raise_for_status(response, what)
                        body = self._read_capped(response, what, cap)
            except Transient:
                if not watchdog.fired:
                    raise
        if watchdog.fired:  # whatever came, it may be cut short: a body without Content-Length ends at the cut
            raise Transient("cut off while still receiving")
        if check is not None and status != 304:
            check(body)
        return body, status, response.headers

    def _get_same_origin(self, url: str, what: str, headers: dict, timeout: float) -> requests.Response:
        """The response to GET url, following redirects only to the same scheme, host and port."""
        for _ in range(MAX_REDIRECTS + 1):
            sent = dict(headers)
            if self._token and origin(url) in self.token_origins:
                sent["Authorization"] = f"Bearer {self._token}"
            try:
                response = self._session.get(url, headers=sent, timeout=timeout, stream=True, allow_redirects=False)
            except requests.RequestException as exc:
                raise Transient(exception_reason(exc)) from None
            if not response.is_redirect:
                return response
            target = urljoin(url, response.headers["Location"])
            response.close()
            if origin(target) is None or origin(target) != origin(url):
                raise SourceError(self._scrub(
                    f"cannot fetch {what}: refusing a redirect to another host ({display(target)})"))
            url = target
        raise SourceError(self._scrub(f"cannot fetch {what}: more than {MAX_REDIRECTS} redirects"))

    def _raise_for_status(self, response: requests.Response, what: str):
        status = response.status_code
        label = f"HTTP {status} {response.reason or ''}".strip()
        retry_after = retry_after_s(response.headers)
        rate_limited = status == 429 or (status == 403 and (
            retry_after is not None or response.headers.get("X-RateLimit-Remaining") == "0"))
        if rate_limited:
            if retry_after is None:
                retry_after = rate_limit_reset_s(response.headers)
            raise RetryAfter(f"{label} (rate limited)", retry_after)
        if status >= 500:
            raise RetryAfter(label, retry_after)
        hint = {401: "; the token is rejected" if self._token else "; no token set", 403: "; forbidden",
                404: "; not found"}.get(status, "")
        if status in (401, 403):
            hint += f" (token from ${self.token_env})" if self._token else f" (set ${self.token_env})"
        error = NotFound if status == 404 else SourceError
        raise error(self._scrub(f"cannot fetch {what}: {label}{hint}"))

    def _read_capped(self, response: requests.Response, what: str, cap: int) -> bytes:
        declared = (response.headers.get("Content-Length") or "").strip()
        declared_n = int(declared) if _DIGITS.fullmatch(declared) else None
        if declared_n is not None and declared_n > cap:
            raise SourceError(f"cannot fetch {what}: body of {declared_n} bytes is over the {cap}-byte cap")
        chunks, total = [], 0
        try:
            for chunk in response.iter_content(chunk_size=256 * 1024):
                total += len(chunk)
                if total > cap:
                    raise SourceError(f"cannot fetch {what}: body is over the {cap}-byte cap")
                chunks.append(chunk)
        except (requests.RequestException, urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            raise Transient(f"body cut short, {exception_reason(exc)}") from None
        body = b"".join(chunks)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if declared_n is not None and encoding in ("", "identity") and len(body) != declared_n:
            raise Transient(f"body cut short, {len(body)} of {declared_n} bytes")
        return body

    def _scrub(self, text: str) -> str:
        text = one_line(text, 500)
        return text.replace(self._token, "***") if self._token else text


def retry_after_s(headers) -> float | None:
    value = (headers.get("Retry-After") or "").strip()
    if not value:
        return None
    if _DIGITS.fullmatch(value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def rate_limit_reset_s(headers) -> float | None:
    value = (headers.get("X-RateLimit-Reset") or "").strip()
    return max(0.0, float(value) - time.time()) if _DIGITS.fullmatch(value) else None
