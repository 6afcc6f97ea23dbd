"""The live upstream: the benchmark CSVs on GitHub, or on any HTTP server that serves GitHub's two shapes.

- commit listing: ``{api}/repos/{owner}/{name}/commits?path={path}&per_page=N&page=K`` (JSON, newest first,
  paginated through the ``Link: <...>; rel="next"`` header);
- raw file at a commit: ``{raw}/{owner}/{name}/{commit}/{path}`` (the CSV bytes).

Requests go through `HttpClient`: a per-read timeout plus an overall deadline for each file and each
listing (retries and waits included; `$KERNELINDEX_HTTP_DEADLINE_S`, default 4x the timeout), bounded retries
with exponential backoff (5xx, 429, rate-limit 403, connection errors, truncated or non-CSV bodies),
``Retry-After`` honoured up to ``backoff_cap_s``, bodies streamed and cut off at ``max_bytes``, redirects
followed only on the same scheme, host and port. A listing stops after ``max_pages`` pages
(`$KERNELINDEX_HTTP_MAX_PAGES`); a page may have at most `MAX_LISTING_BYTES` and its JSON may nest at most
`MAX_JSON_DEPTH` levels. Listings are fetched
conditionally (ETag / If-None-Match), the ETags and bodies kept in memory and, when ``cache_dir`` is given,
on disk. An optional token (from the environment variable named by ``token_env``) is sent as
``Authorization: Bearer ...`` to the API and raw hosts only, and never appears in a log line or an error
message. Every failure is a ``SourceError`` with a one-line reason.

The listing for a path includes the commit that deleted the file (if upstream ever does); its raw file is a
404. ``read`` then asks the API for that commit (``{api}/repos/{owner}/{name}/commits/{sha}``) and, only when
the commit's file list says the path was removed (or renamed away), raises ``FileDeletedAtRevision``, which
the ingestion records as a revision with no rows. Any other 404 stays a plain ``SourceError``.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import logging
import math
import os
import re
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote, urlencode, urljoin, urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from kernelindex_pipeline.sources.base import (
    UPSTREAM_PATHS,
    UPSTREAM_REPOSITORY,
    FileDeletedAtRevision,
    MiB,
    Revision,
    SourceError,
    env_number,
    one_line,
    stream_of,
    utc_iso,
)

log = logging.getLogger(__name__)

GITHUB_API_URL = "https://api.github.com"
GITHUB_RAW_URL = "https://raw.githubusercontent.com"
USER_AGENT = "kernelindex-pipeline"
DEADLINE_PER_TIMEOUT = 4  # the default deadline, in per-read timeouts
MAX_PAGES = 100
MAX_REDIRECTS = 5
MAX_JSON_DEPTH = 64
MAX_LISTING_BYTES = 8 * MiB  # a page of 100 commits is well under 1 MiB; the cap bounds the JSON work too

_SHA = re.compile(r"[0-9a-f]{40}")
_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_INCOMPLETE = re.compile(r"IncompleteRead\((\d+) bytes read, (\d+) more expected\)")
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_DIGITS = re.compile(r"[0-9]+")
_JSON_MARK = re.compile(rb'[\[\]{}"]')
_JSON_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*+"', re.DOTALL)
_API_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}


class _Transient(Exception):
    """A failure worth another attempt; the message is the one-line reason."""


class _RetryAfter(_Transient):
    def __init__(self, reason: str, wait_s: float | None):
        super().__init__(reason)
        self.wait_s = wait_s


class _NotFound(SourceError):
    """HTTP 404: not retried."""


def _display(url: str) -> str:
    """A URL fit for a message: no user info, no query string."""
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
    except ValueError:
        return "(an unparsable URL)"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _origin(url: str) -> tuple[str, str, int | None] | None:
    """Scheme, host and port of a URL (None when it does not parse): redirects and the token stay within one."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        return None
    return (scheme, (parts.hostname or "").lower(), port) if parts.hostname else None


def _exception_reason(exc: BaseException) -> str:
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


def _setting(value, label: str, kind: type, *, positive: bool, env: str | None = None):
    """A numeric setting, checked: a SourceError names it (and its environment variable) when it is unusable."""
    where = f" (${env})" if env else ""
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise SourceError(f"the {label} is not a number: {one_line(repr(value), 40)}{where}") from None
    if (isinstance(number, float) and not math.isfinite(number)) or number < 0 or (positive and number == 0):
        bound = "more than 0" if positive else "at least 0"
        raise SourceError(f"the {label} must be {bound}, not {one_line(repr(value), 40)}{where}")
    return number


# -- the deadline -------------------------------------------------------------------------------------------


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


class _WatchedHTTPConnection(_WatchedConnectionMixin, HTTPConnection):
    pass


class _WatchedHTTPSConnection(_WatchedConnectionMixin, HTTPSConnection):
    pass


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


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
    """Shuts the socket of this thread's request down when the deadline passes.

    A per-read timeout never trips on a server that sends a byte now and then; this bounds the whole
    request, headers and body alike.
    """

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


# -- the HTTP client ----------------------------------------------------------------------------------------


class HttpClient:
    """GET with retries and backoff, an overall deadline, a size cap, and same-host redirects only.

    The token goes to `token_origins` only (scheme, host, port); every message has it scrubbed.
    """

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

        `max_bytes` lowers the client's body size cap for this request.
        """
        cap = self.max_bytes if max_bytes is None else min(self.max_bytes, max_bytes)
        attempts = self.max_retries + 1
        reason = ""
        for attempt in range(attempts):
            if deadline.remaining() <= 0:
                raise self._out_of_time(what, reason, deadline, attempt)
            wait = None
            try:
                return self._attempt(url, what, deadline, headers or {}, check, not_modified_ok, cap)
            except _RetryAfter as exc:
                reason, wait = str(exc), exc.wait_s
            except _Transient as exc:
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
            except _Transient:
                if not watchdog.fired:
                    raise
        if watchdog.fired:  # whatever came, it may be cut short: a body without Content-Length ends at the cut
            raise _Transient("cut off while still receiving")
        if check is not None and status != 304:
            check(body)
        return body, status, response.headers

    def _get_same_origin(self, url: str, what: str, headers: dict, timeout: float) -> requests.Response:
        """The response to GET url, following redirects only to the same scheme, host and port."""
        for _ in range(MAX_REDIRECTS + 1):
            sent = dict(headers)
            if self._token and _origin(url) in self.token_origins:
                sent["Authorization"] = f"Bearer {self._token}"
            try:
                response = self._session.get(url, headers=sent, timeout=timeout, stream=True, allow_redirects=False)
            except requests.RequestException as exc:
                raise _Transient(_exception_reason(exc)) from None
            if not response.is_redirect:
                return response
            target = urljoin(url, response.headers["Location"])
            response.close()
            if _origin(target) is None or _origin(target) != _origin(url):
                raise SourceError(self._scrub(
                    f"cannot fetch {what}: refusing a redirect to another host ({_display(target)})"))
            url = target
        raise SourceError(self._scrub(f"cannot fetch {what}: more than {MAX_REDIRECTS} redirects"))

    def _raise_for_status(self, response: requests.Response, what: str):
        status = response.status_code
        label = f"HTTP {status} {response.reason or ''}".strip()
        retry_after = _retry_after_s(response.headers)
        rate_limited = status == 429 or (status == 403 and (
            retry_after is not None or response.headers.get("X-RateLimit-Remaining") == "0"))
        if rate_limited:
            if retry_after is None:
                retry_after = _rate_limit_reset_s(response.headers)
            raise _RetryAfter(f"{label} (rate limited)", retry_after)
        if status >= 500:
            raise _RetryAfter(label, retry_after)
        hint = {
            401: "; the token is rejected" if self._token else "; no token set",
            403: "; forbidden",
            404: "; not found",
        }.get(status, "")
        if status in (401, 403) and self._token:
            hint += f" (token from ${self.token_env})"
        elif status in (401, 403):
            hint += f" (set ${self.token_env})"
        error = _NotFound if status == 404 else SourceError
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
            raise _Transient(f"body cut short, {_exception_reason(exc)}") from None
        body = b"".join(chunks)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if declared_n is not None and encoding in ("", "identity") and len(body) != declared_n:
            raise _Transient(f"body cut short, {len(body)} of {declared_n} bytes")
        return body

    def _scrub(self, text: str) -> str:
        text = one_line(text, 500)
        return text.replace(self._token, "***") if self._token else text


def _retry_after_s(headers) -> float | None:
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


def _rate_limit_reset_s(headers) -> float | None:
    value = (headers.get("X-RateLimit-Reset") or "").strip()
    return max(0.0, float(value) - time.time()) if _DIGITS.fullmatch(value) else None


# -- the GitHub source --------------------------------------------------------------------------------------


class GitHubSource:
    """Upstream revisions and CSV bytes from GitHub (``github:owner/name``) or an http(s) base URL."""

    def __init__(
        self,
        location: str,
        *,
        paths: tuple[str, ...] = UPSTREAM_PATHS,
        repository: str = UPSTREAM_REPOSITORY,
        api_url: str | None = None,
        raw_url: str | None = None,
        token_env: str = "GITHUB_TOKEN",
        timeout_s: float = 30,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        backoff_cap_s: float = 60.0,
        max_bytes: int = 64 * MiB,
        deadline_s: float | None = None,
        max_pages: int | None = None,
        cache_dir: str | os.PathLike | None = None,
        per_page: int = 100,
    ):
        self.location = location
        self.paths = tuple(paths)
        if location.startswith("github:"):
            repository = location.removeprefix("github:").strip("/")
            default_api, default_raw = GITHUB_API_URL, GITHUB_RAW_URL
        elif location.startswith(("http://", "https://")):
            default_api = default_raw = location.rstrip("/")
        else:
            raise SourceError(f"not a GitHub location (github:owner/name or an http(s) URL): {location!r}")
        if not _REPOSITORY.fullmatch(repository):
            raise SourceError(f"not a repository name (owner/name): {repository!r}")
        self.repository = repository
        self.api_url = (api_url or default_api).rstrip("/")
        self.raw_url = (raw_url or default_raw).rstrip("/")
        for url in (self.api_url, self.raw_url):
            if urlsplit(url).scheme not in ("http", "https") or _origin(url) is None:
                raise SourceError(f"not an http(s) URL: {_display(url)!r}")
        timeout_s = _setting(timeout_s, "HTTP timeout (seconds)", float, positive=True,
                             env="KERNELINDEX_HTTP_TIMEOUT_S")
        if deadline_s is None:
            deadline_s = env_number("KERNELINDEX_HTTP_DEADLINE_S", DEADLINE_PER_TIMEOUT * timeout_s, float)
        if max_pages is None:
            max_pages = env_number("KERNELINDEX_HTTP_MAX_PAGES", MAX_PAGES, int)
        self.deadline_s = _setting(deadline_s, "HTTP deadline (seconds)", float, positive=True,
                                   env="KERNELINDEX_HTTP_DEADLINE_S")
        self.max_pages = _setting(max_pages, "listing page cap", int, positive=True, env="KERNELINDEX_HTTP_MAX_PAGES")
        self.per_page = min(100, _setting(per_page, "listing page size", int, positive=True))
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.token_env = token_env
        self._etags: dict[str, dict] = {}
        self._http = HttpClient(
            token=os.environ.get(token_env, "").strip() if token_env else "",
            token_env=token_env,
            token_origins=(_origin(self.api_url), _origin(self.raw_url)),
            timeout_s=timeout_s,
            max_retries=_setting(max_retries, "HTTP retry count", int, positive=False, env="KERNELINDEX_HTTP_RETRIES"),
            backoff_s=_setting(backoff_s, "HTTP backoff (seconds)", float, positive=False,
                               env="KERNELINDEX_HTTP_BACKOFF_S"),
            backoff_cap_s=_setting(backoff_cap_s, "HTTP backoff cap (seconds)", float, positive=False),
            max_bytes=_setting(max_bytes, "HTTP body size cap", int, positive=True, env="KERNELINDEX_HTTP_MAX_BYTES"),
        )

    def __repr__(self) -> str:
        return f"GitHubSource({self.location!r}, repository={self.repository!r})"

    @property
    def sleep(self):
        """How the client waits between attempts (tests replace it to record the waits)."""
        return self._http.sleep

    @sleep.setter
    def sleep(self, sleep) -> None:
        self._http.sleep = sleep

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GitHubSource:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- the source interface -------------------------------------------------------------------------

    def list_revisions(self) -> list[Revision]:
        revisions = []
        for path in self.paths:
            seen: set[str] = set()
            for item in self._list_commits(path):
                sha = item["sha"]
                if sha not in seen:
                    seen.add(sha)
                    committed_at = utc_iso(item["commit"]["committer"]["date"])
                    revisions.append(Revision(committed_at, stream_of(path), sha, path, self.location))
        return sorted(revisions)

    def read(self, revision: Revision) -> bytes:
        if not _SHA.fullmatch(revision.commit):
            raise SourceError(f"{revision.key}: not a full commit id: {revision.commit!r}")
        deadline = Deadline(self.deadline_s)
        url = f"{self.raw_url}/{self.repository}/{revision.commit}/{quote(revision.path)}"
        what = f"{revision.path}@{revision.commit[:12]} from {_display(url)}"
        try:
            body, _, _ = self._http.get(url, what, deadline, check=_check_csv)
        except _NotFound as exc:
            if self._removed_by(revision, deadline):
                raise FileDeletedAtRevision(
                    f"{revision.key}: commit {revision.commit[:12]} deleted {revision.path}") from None
            raise SourceError(str(exc)) from None
        return body

    def _removed_by(self, revision: Revision, deadline: Deadline) -> bool:
        """Whether the commit's file list (from the API) says it removed the path or renamed it away."""
        url = f"{self.api_url}/repos/{self.repository}/commits/{revision.commit}"
        try:
            body, _, _ = self._http.get(url, f"commit {revision.commit[:12]} from {_display(self.api_url)}",
                                        deadline, headers=_API_HEADERS, check=_check_json_object)
        except SourceError:
            return False  # cannot confirm: keep the 404 a failure
        files = _parse_json(body, "the commit").get("files")
        return isinstance(files, list) and any(
            isinstance(f, dict) and (
                (f.get("filename") == revision.path and f.get("status") == "removed")
                or (f.get("previous_filename") == revision.path and f.get("status") == "renamed"))
            for f in files)

    # -- listing ---------------------------------------------------------------------------------------

    def _list_commits(self, path: str):
        """The commit objects of one path, page after page, within one deadline and `max_pages` pages."""
        base = f"{self.api_url}/repos/{self.repository}/commits"
        what = f"commit listing of {path} from {_display(base)}"
        url: str | None = f"{base}?{urlencode({'path': path, 'per_page': self.per_page, 'page': 1})}"
        deadline = Deadline(self.deadline_s)
        visited: set[str] = set()
        while url:
            if url in visited:
                raise SourceError(f"{what}: pagination loops at {_display(url)}")
            if len(visited) == self.max_pages:
                raise SourceError(f"{what}: more than {self.max_pages} pages, the cap ($KERNELINDEX_HTTP_MAX_PAGES)")
            visited.add(url)
            items, next_url = self._listing_page(url, what, deadline)
            yield from items
            if next_url and (_origin(next_url) != _origin(base) or urlsplit(next_url).path != urlsplit(base).path):
                raise SourceError(f"{what}: refusing to follow a pagination link elsewhere ({_display(next_url)})")
            url = next_url

    def _listing_page(self, url: str, what: str, deadline: Deadline) -> tuple[list[dict], str | None]:
        cached = self._cached(url)
        headers = dict(_API_HEADERS)
        if cached:
            headers["If-None-Match"] = cached["etag"]
        body, status, response_headers = self._http.get(url, what, deadline, headers=headers, check=_check_listing,
                                                        not_modified_ok=bool(cached), max_bytes=MAX_LISTING_BYTES)
        if status == 304:
            log.debug("%s: not modified", what)
            return _check_listing(cached["body"].encode("utf-8")), cached.get("next")
        items = _check_listing(body)
        next_url = _next_link(response_headers.get("Link", ""))
        etag = response_headers.get("ETag")
        if etag:
            self._remember(url, {"url": url, "etag": etag, "body": body.decode("utf-8"), "next": next_url})
        return items, next_url

    def _cache_file(self, url: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / "github-etags" / (hashlib.sha256(url.encode("utf-8")).hexdigest() + ".json")

    def _cached(self, url: str) -> dict | None:
        if url in self._etags:
            return self._etags[url]
        file = self._cache_file(url)
        if file is None or not file.is_file():
            return None
        try:
            entry = _parse_json(file.read_bytes(), "the listing cache entry")
            if not (isinstance(entry, dict) and entry.get("url") == url and isinstance(entry.get("etag"), str)
                    and isinstance(entry.get("body"), str) and isinstance(entry.get("next"), (str, type(None)))):
                return None
            _check_listing(entry["body"].encode("utf-8"))
        except (OSError, ValueError, _Transient):
            return None  # an unreadable cache entry is only a missed shortcut
        self._etags[url] = entry
        return entry

    def _remember(self, url: str, entry: dict) -> None:
        self._etags[url] = entry
        file = self._cache_file(url)
        if file is None:
            return
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            partial = file.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(json.dumps(entry), encoding="utf-8")
            os.replace(partial, file)
        except OSError as exc:
            log.warning("cannot write the listing cache under %s: %s", self.cache_dir, exc.strerror or exc)


def _next_link(link_header: str) -> str | None:
    for part in link_header.split(","):
        match = _NEXT_LINK.search(part)
        if match:
            return match.group(1).strip()
    return None


# -- checking bodies ----------------------------------------------------------------------------------------


def _parse_json(body: bytes, what: str):
    """JSON from an untrusted body; its nesting is measured (without recursion) before the parser sees it."""
    depth, position = 0, 0
    while mark := _JSON_MARK.search(body, position):
        position = mark.end()
        if mark.group() == b'"':
            rest = _JSON_STRING_REST.match(body, position)
            if rest is None:
                raise _Transient(f"{what} is not JSON (a string never ends)")
            position = rest.end()
        elif mark.group() in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise _Transient(f"{what} is JSON nested deeper than {MAX_JSON_DEPTH} levels")
        else:
            depth -= 1
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        snippet = body[:60].decode("utf-8", errors="replace")
        raise _Transient(f"{what} is not JSON (starts {one_line(snippet, 60)!r})") from None


def _check_csv(body: bytes) -> None:
    """Trust a body only if it looks like the benchmark CSV: a UTF-8, comma-separated header with kernel_name."""
    head = body[:2048].lstrip()
    if not head:
        raise _Transient("empty body, not a CSV")
    if head[:1] == b"<" or b"<html" in head.lower():
        raise _Transient("an HTML page, not a CSV")
    first = body.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        header = first.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _Transient("the CSV header is not UTF-8") from None
    columns = [column.strip().strip('"') for column in header.split(",")]
    if len(columns) < 2 or "kernel_name" not in columns:
        raise _Transient(f"not the benchmark CSV (header: {one_line(header, 80)!r})")


def _check_json_object(body: bytes) -> None:
    if not isinstance(_parse_json(body, "the response"), dict):
        raise _Transient("the response is not a JSON object")


def _check_listing(body: bytes) -> list[dict]:
    """The commit objects of one listing page, each with a 40-hex sha and a committer date."""
    items = _parse_json(body, "the commit listing")
    if not isinstance(items, list):
        raise _Transient("the commit listing is not a JSON list")
    for item in items:
        try:
            sha, date = item["sha"], item["commit"]["committer"]["date"]
            if not (isinstance(sha, str) and _SHA.fullmatch(sha)):
                raise ValueError(f"bad sha {sha!r}")
            utc_iso(date)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _Transient(f"the commit listing has a malformed commit object ({one_line(str(exc), 80)})") from None
    return items
