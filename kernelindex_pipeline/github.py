"""The live upstream: the benchmark CSVs on GitHub, or on any HTTP server that serves GitHub's two shapes.

- commit listing: ``{api}/repos/{owner}/{name}/commits?path={path}&per_page=N&page=K`` (JSON, newest first,
  paginated through the ``Link: <...>; rel="next"`` header);
- raw file at a commit: ``{raw}/{owner}/{name}/{commit}/{path}`` (the CSV bytes).

Every request has a timeout and bounded retries with exponential backoff (5xx, 429, rate-limit 403,
connection errors, truncated or non-CSV bodies); ``Retry-After`` is honoured up to ``backoff_cap_s``.
Listings are fetched conditionally (ETag / If-None-Match), the ETags and bodies kept in memory and, when
``cache_dir`` is given, on disk. Bodies are streamed and cut off at ``max_bytes``. An optional token (from
the environment variable named by ``token_env``) is sent as ``Authorization: Bearer ...`` to the API and raw
hosts only, and never appears in a log line or an error message. Every failure is a ``SourceError`` with a
one-line reason.

The listing for a path includes the commit that deleted the file (if upstream ever does); its raw file is a
404. ``read`` then asks the API for that commit (``{api}/repos/{owner}/{name}/commits/{sha}``) and, only when
the commit's file list says the path was removed (or renamed away), raises ``FileDeletedAtRevision``, which
the ingestion records as a revision with no rows. Any other 404 stays a plain ``SourceError``.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import requests

from kernelindex_pipeline.sources import (
    UPSTREAM_PATHS,
    FileDeletedAtRevision,
    UPSTREAM_REPOSITORY,
    Revision,
    SourceError,
    stream_of,
    utc_iso,
)

log = logging.getLogger(__name__)

GITHUB_API_URL = "https://api.github.com"
GITHUB_RAW_URL = "https://raw.githubusercontent.com"
USER_AGENT = "kernelindex-pipeline"
MiB = 2**20

_SHA = re.compile(r"[0-9a-f]{40}")
_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_INCOMPLETE = re.compile(r"IncompleteRead\((\d+) bytes read, (\d+) more expected\)")
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


class _Transient(Exception):
    """A failure worth another attempt; the message is the one-line reason."""


class _NotFound(SourceError):
    """HTTP 404: not retried."""


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _display(url: str) -> str:
    """A URL fit for a message: no user info, no query string."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


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
    return f"{kind}: {_one_line(text, 160)}"


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
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
                raise SourceError(f"not an http(s) URL: {_display(url)!r}")
        self.token_env = token_env
        self._token = os.environ.get(token_env, "").strip() if token_env else ""
        self.timeout_s = timeout_s
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = backoff_s
        self.backoff_cap_s = backoff_cap_s
        self.max_bytes = int(max_bytes)
        self.per_page = max(1, min(100, int(per_page)))
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.sleep = time.sleep  # replaceable, e.g. by tests that record the waits
        self._etags: dict[str, dict] = {}
        self._session = requests.Session()
        self._session.headers["User-Agent"] = USER_AGENT

    def __repr__(self) -> str:
        return f"GitHubSource({self.location!r}, repository={self.repository!r})"

    def close(self) -> None:
        self._session.close()

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
        url = f"{self.raw_url}/{self.repository}/{revision.commit}/{quote(revision.path)}"
        what = f"{revision.path}@{revision.commit[:12]} from {_display(url)}"
        try:
            body, _, _ = self._fetch(url, what, check=_check_csv)
        except _NotFound as exc:
            if self._removed_by(revision):
                raise FileDeletedAtRevision(f"{revision.key}: commit {revision.commit[:12]} deleted {revision.path}") from None
            raise SourceError(str(exc)) from None
        return body

    def _removed_by(self, revision: Revision) -> bool:
        """Whether the commit's file list (from the API) says it removed the path or renamed it away."""
        url = f"{self.api_url}/repos/{self.repository}/commits/{revision.commit}"
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
        try:
            body, _, _ = self._fetch(url, f"commit {revision.commit[:12]} from {_display(self.api_url)}",
                                     headers=headers, check=_check_json_object)
        except SourceError:
            return False  # cannot confirm: keep the 404 a failure
        files = json.loads(body.decode("utf-8")).get("files")
        return isinstance(files, list) and any(
            isinstance(f, dict) and (
                (f.get("filename") == revision.path and f.get("status") == "removed")
                or (f.get("previous_filename") == revision.path and f.get("status") == "renamed"))
            for f in files)

    # -- listing ---------------------------------------------------------------------------------------

    def _list_commits(self, path: str):
        base = f"{self.api_url}/repos/{self.repository}/commits"
        url: str | None = f"{base}?{urlencode({'path': path, 'per_page': self.per_page, 'page': 1})}"
        visited: set[str] = set()
        while url:
            if url in visited:
                raise SourceError(f"commit listing of {path} from {_display(base)}: pagination loops at {url}")
            visited.add(url)
            what = f"commit listing of {path} from {_display(base)}"
            items, next_url = self._listing_page(url, what)
            yield from items
            if next_url and (_origin(next_url) != _origin(base) or urlsplit(next_url).path != urlsplit(base).path):
                raise SourceError(f"{what}: refusing to follow a pagination link elsewhere ({_display(next_url)})")
            url = next_url

    def _listing_page(self, url: str, what: str) -> tuple[list[dict], str | None]:
        cached = self._cached(url)
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
        if cached:
            headers["If-None-Match"] = cached["etag"]
        body, status, response_headers = self._fetch(url, what, headers=headers, check=_check_listing,
                                                     not_modified_ok=bool(cached))
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
            entry = json.loads(file.read_text(encoding="utf-8"))
            if entry.get("url") != url or not isinstance(entry.get("etag"), str) or not isinstance(entry.get("body"), str):
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

    # -- one request, with retries ---------------------------------------------------------------------

    def _fetch(self, url: str, what: str, *, headers: dict | None = None, check=None,
               not_modified_ok: bool = False) -> tuple[bytes, int, requests.structures.CaseInsensitiveDict]:
        """GET url until it gives a checked body (or 304 when allowed); SourceError after the retries."""
        headers = dict(headers or {})
        if self._token and _origin(url) in (_origin(self.api_url), _origin(self.raw_url)):
            headers["Authorization"] = f"Bearer {self._token}"
        attempts = self.max_retries + 1
        reason = "no attempt made"
        for attempt in range(attempts):
            wait = None
            try:
                body, status, response_headers = self._attempt(url, what, headers, check, not_modified_ok)
                return body, status, response_headers
            except _RetryAfter as exc:
                reason, wait = str(exc), exc.wait_s
            except _Transient as exc:
                reason = str(exc)
            if attempt + 1 < attempts:
                backoff = min(self.backoff_cap_s, self.backoff_s * 2**attempt)
                wait = backoff if wait is None else min(self.backoff_cap_s, max(wait, backoff))
                log.warning("%s: %s; retrying in %.2fs (attempt %d of %d)",
                            self._scrub(what), self._scrub(reason), wait, attempt + 2, attempts)
                self.sleep(wait)
        raise SourceError(self._scrub(f"cannot fetch {what}: {reason} (after {attempts} attempts)"))

    def _attempt(self, url, what, headers, check, not_modified_ok):
        try:
            response = self._session.get(url, headers=headers, timeout=self.timeout_s, stream=True)
        except requests.RequestException as exc:
            raise _Transient(_exception_reason(exc)) from None
        with response:
            status = response.status_code
            if status == 304 and not_modified_ok:
                return b"", status, response.headers
            if status != 200:
                self._raise_for_status(response, what)
            body = self._read_capped(response, what)
        if check is not None:
            check(body)
        return body, status, response.headers

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

    def _read_capped(self, response: requests.Response, what: str) -> bytes:
        declared = response.headers.get("Content-Length")
        declared_n = int(declared) if declared and declared.strip().isdigit() else None
        if declared_n is not None and declared_n > self.max_bytes:
            raise SourceError(f"cannot fetch {what}: body of {declared_n} bytes is over the {self.max_bytes}-byte cap")
        chunks, total = [], 0
        try:
            for chunk in response.iter_content(chunk_size=256 * 1024):
                total += len(chunk)
                if total > self.max_bytes:
                    raise SourceError(f"cannot fetch {what}: body is over the {self.max_bytes}-byte cap")
                chunks.append(chunk)
        except requests.RequestException as exc:
            raise _Transient(f"body cut short, {_exception_reason(exc)}") from None
        body = b"".join(chunks)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if declared_n is not None and encoding in ("", "identity") and len(body) != declared_n:
            raise _Transient(f"body cut short, {len(body)} of {declared_n} bytes")
        return body

    def _scrub(self, text: str) -> str:
        text = _one_line(text, 500)
        return text.replace(self._token, "***") if self._token else text


class _RetryAfter(_Transient):
    def __init__(self, reason: str, wait_s: float | None):
        super().__init__(reason)
        self.wait_s = wait_s


def _retry_after_s(headers) -> float | None:
    value = (headers.get("Retry-After") or "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _rate_limit_reset_s(headers) -> float | None:
    value = (headers.get("X-RateLimit-Reset") or "").strip()
    return max(0.0, float(value) - time.time()) if value.isdigit() else None


def _next_link(link_header: str) -> str | None:
    for part in link_header.split(","):
        match = _NEXT_LINK.search(part)
        if match:
            return match.group(1).strip()
    return None


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
        raise _Transient(f"not the benchmark CSV (header: {_one_line(header, 80)!r})")


def _check_json_object(body: bytes) -> None:
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _Transient("the response is not JSON") from None
    if not isinstance(value, dict):
        raise _Transient("the response is not a JSON object")


def _check_listing(body: bytes) -> list[dict]:
    """The commit objects of one listing page, each with a 40-hex sha and a committer date."""
    try:
        items = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        snippet = body[:60].decode("utf-8", errors="replace")
        raise _Transient(f"the commit listing is not JSON (starts {_one_line(snippet, 60)!r})") from None
    if not isinstance(items, list):
        raise _Transient("the commit listing is not a JSON list")
    for item in items:
        try:
            sha, date = item["sha"], item["commit"]["committer"]["date"]
            if not (isinstance(sha, str) and _SHA.fullmatch(sha)):
                raise ValueError(f"bad sha {sha!r}")
            utc_iso(date)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _Transient(f"the commit listing has a malformed commit object ({_one_line(str(exc), 80)})") from None
    return items
