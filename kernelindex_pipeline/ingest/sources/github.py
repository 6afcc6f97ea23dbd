"""The live upstream: the benchmark CSVs on GitHub, or on any HTTP server that serves GitHub's two shapes.

- commit listing: ``{api}/repos/{owner}/{name}/commits?path={path}&per_page=N&page=K`` (JSON, newest first,
  paginated through the ``Link: <...>; rel="next"`` header);
- raw file at a commit: ``{raw}/{owner}/{name}/{commit}/{path}`` (the CSV bytes).

Requests go through `HttpClient` (``sources.http``: retries, backoff, size cap, same-host redirects) with one
overall deadline per file and per listing (`$KERNELINDEX_HTTP_DEADLINE_S`, default 4x the timeout); truncated or
non-CSV bodies are retried. A listing stops after ``max_pages`` pages (`$KERNELINDEX_HTTP_MAX_PAGES`); a page
may have at most `MAX_LISTING_BYTES` and its JSON may nest at most `MAX_JSON_DEPTH` levels. Listings are fetched
conditionally (ETag / If-None-Match), the ETags and bodies kept in memory and, when ``cache_dir`` is given, on
disk. An optional token (from the environment variable named by ``token_env``) is sent as ``Authorization:
Bearer ...`` to the API and raw hosts only, and never appears in a log line or an error message. Every failure
is a ``SourceError`` with a one-line reason.

What is listed follows from the source's declaration (`SourceSpec`, ``LIGER_MAIN`` unless the location names
another: ``github:owner/name@gh-pages``, or ``http(s)://...#gh-pages`` where the fragment is never sent):
its exact paths, or, for a declaration by pattern (gh-pages runs), every path of the branch's tree that matches
(``{api}/repos/{owner}/{name}/git/trees/{branch}?recursive=1``, at most `MAX_TREE_BYTES`, refused when GitHub
says it is truncated) plus the matching `paths` the caller names (runs upstream has since removed: the tree
no longer has them, their history still does). Each path's history is ``commits?sha={branch}&path=...``.

The listing for a path includes the commit that deleted the file (if upstream ever does); its raw file is a
404. ``read`` then asks the API for that commit (``{api}/repos/{owner}/{name}/commits/{sha}``) and, only when
the commit's file list says the path was removed (or renamed away), raises ``FileDeletedAtRevision``, which
the ingestion records as a revision with no rows. Any other 404 stays a plain ``SourceError``.

Long because one source class serves both declarations' listing shapes (commits per path for the main
branch, the branch tree for gh-pages) with the cache and the deleted-file check they share.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

from kernelindex_pipeline.ingest.sources.base import (LIGER_MAIN, FileDeletedAtRevision, MiB, Revision, SourceError,
                                               SourceSpec, env_number, one_line, printable, screen_revisions,
                                               source_spec, utc_iso)
from kernelindex_pipeline.ingest.sources.http import Deadline, HttpClient, NotFound, Transient, display, origin

log = logging.getLogger(__name__)

GITHUB_API_URL = "https://api.github.com"
GITHUB_RAW_URL = "https://raw.githubusercontent.com"
DEADLINE_PER_TIMEOUT = 4  # the default deadline, in per-read timeouts
MAX_PAGES = 100
MAX_JSON_DEPTH = 64
MAX_LISTING_BYTES = 8 * MiB  # a page of 100 commits is well under 1 MiB; the cap bounds the JSON work too
MAX_TREE_BYTES = 32 * MiB  # GitHub truncates a recursive tree at 100,000 entries / 7 MB anyway

_SHA = re.compile(r"[0-9a-f]{40}")
_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_SELECTOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]*")
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_JSON_MARK = re.compile(rb'[\[\]{}"]')
_JSON_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*+"', re.DOTALL)
_API_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}


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


class GitHubSource:
    """Upstream revisions and CSV bytes from GitHub (``github:owner/name``) or an http(s) base URL."""

    def __init__(
        self,
        location: str,
        *,
        paths: tuple[str, ...] | None = None,
        repository: str | None = None,
        spec: SourceSpec | None = None,
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
        selector = ""
        if location.startswith("github:"):
            named, _, selector = location.removeprefix("github:").partition("@")
            repository = named.strip("/")
            default_api, default_raw = GITHUB_API_URL, GITHUB_RAW_URL
        elif location.startswith(("http://", "https://")):
            base, _, selector = location.partition("#")
            default_api = default_raw = base.rstrip("/")
        else:
            raise SourceError(f"not a GitHub location (github:owner/name or an http(s) URL): {location!r}")
        if selector and not _SELECTOR.fullmatch(selector):
            raise SourceError(f"not a source or branch name: {printable(selector)!r} in {display(location)!r}")
        if spec is None:
            spec = source_spec(selector) if selector else LIGER_MAIN
        self.extra_paths: tuple[str, ...] = ()
        if paths is not None:
            if spec.paths:
                spec = spec.with_paths(paths)
            else:
                self.extra_paths = tuple(p for p in paths if spec.matches(p))
        self.spec = spec
        self.paths = spec.paths  # exact paths; a declaration by pattern lists the branch's tree
        repository = repository or spec.repository
        if not _REPOSITORY.fullmatch(repository):
            raise SourceError(f"not a repository name (owner/name): {repository!r}")
        self.repository = repository
        self.api_url = (api_url or default_api).rstrip("/")
        self.raw_url = (raw_url or default_raw).rstrip("/")
        for url in (self.api_url, self.raw_url):
            if urlsplit(url).scheme not in ("http", "https") or origin(url) is None:
                raise SourceError(f"not an http(s) URL: {display(url)!r}")
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
            token_origins=(origin(self.api_url), origin(self.raw_url)),
            timeout_s=timeout_s,
            max_retries=_setting(max_retries, "HTTP retry count", int, positive=False, env="KERNELINDEX_HTTP_RETRIES"),
            backoff_s=_setting(backoff_s, "HTTP backoff (seconds)", float, positive=False,
                               env="KERNELINDEX_HTTP_BACKOFF_S"),
            backoff_cap_s=_setting(backoff_cap_s, "HTTP backoff cap (seconds)", float, positive=False),
            max_bytes=_setting(max_bytes, "HTTP body size cap", int, positive=True, env="KERNELINDEX_HTTP_MAX_BYTES"),
        )

    def __repr__(self) -> str:
        return f"GitHubSource({self.location!r}, repository={self.repository!r}, source={self.spec.name!r})"

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
        for path in self.list_paths():
            seen: set[str] = set()
            for item in self._list_commits(path):
                sha = item["sha"]
                if sha not in seen:
                    seen.add(sha)
                    committed_at = utc_iso(item["commit"]["committer"]["date"])
                    revisions.append(self.spec.revision(committed_at, sha, path, self.location))
        return screen_revisions(revisions)

    def list_paths(self) -> tuple[str, ...]:
        """The files whose history is listed: the exact paths, or the branch tree's matches plus `paths` given."""
        if self.spec.paths:
            return self.spec.paths
        tree = self._tree_paths()
        skipped = sorted(p for p in tree if self.spec.looks_like(p) and not self.spec.matches(p))
        if skipped:
            log.warning("%s: skipped %d path(s) whose run directory does not parse: %s", self.spec.name,
                        len(skipped), ", ".join(printable(p) for p in skipped[:5]))
        return self.spec.select(tree + list(self.extra_paths))

    def _tree_paths(self) -> list[str]:
        """The file paths of the branch's tree, from one recursive tree request."""
        url = f"{self.api_url}/repos/{self.repository}/git/trees/{quote(self.spec.branch, safe='')}?recursive=1"
        what = f"the {self.spec.branch} tree from {display(self.api_url)}"
        body, _, _ = self._http.get(url, what, Deadline(self.deadline_s), headers=_API_HEADERS, check=_check_tree,
                                    max_bytes=MAX_TREE_BYTES)
        tree = _check_tree(body)
        if tree.get("truncated") is True:
            raise SourceError(f"{what}: GitHub truncated the recursive listing; cannot list every run")
        return [entry["path"] for entry in tree["tree"] if entry.get("type") == "blob"]

    def read(self, revision: Revision) -> bytes:
        if revision.refused:
            return b""  # nothing of a refused revision is taken in
        if not _SHA.fullmatch(revision.commit):
            raise SourceError(f"{revision.key}: not a full commit id: {revision.commit!r}")
        deadline = Deadline(self.deadline_s)
        url = f"{self.raw_url}/{self.repository}/{revision.commit}/{quote(revision.path)}"
        what = f"{revision.path}@{revision.commit[:12]} from {display(url)}"
        try:
            body, _, _ = self._http.get(url, what, deadline, check=_check_csv)
        except NotFound as exc:
            if self._removed_by(revision, deadline):
                raise FileDeletedAtRevision(
                    f"{revision.key}: commit {revision.commit[:12]} deleted {revision.path}") from None
            raise SourceError(str(exc)) from None
        return body

    def read_reference(self) -> bytes | None:
        path = self.spec.reference_file
        if not path:
            return None
        url = f"{self.raw_url}/{self.repository}/{quote(self.spec.branch, safe='')}/{quote(path)}"
        what = f"{path}@{self.spec.branch} from {display(url)}"
        try:
            body, _, _ = self._http.get(url, what, Deadline(self.deadline_s), check=_check_json_object)
        except NotFound:
            return None
        return body

    def _removed_by(self, revision: Revision, deadline: Deadline) -> bool:
        """Whether the commit's file list (from the API) says it removed the path or renamed it away."""
        url = f"{self.api_url}/repos/{self.repository}/commits/{revision.commit}"
        try:
            body, _, _ = self._http.get(url, f"commit {revision.commit[:12]} from {display(self.api_url)}",
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
        what = f"commit listing of {path} from {display(base)}"
        query = {"sha": self.spec.branch, "path": path, "per_page": self.per_page, "page": 1}
        url: str | None = f"{base}?{urlencode(query)}"
        deadline = Deadline(self.deadline_s)
        visited: set[str] = set()
        while url:
            if url in visited:
                raise SourceError(f"{what}: pagination loops at {display(url)}")
            if len(visited) == self.max_pages:
                raise SourceError(f"{what}: more than {self.max_pages} pages, the cap ($KERNELINDEX_HTTP_MAX_PAGES)")
            visited.add(url)
            items, next_url = self._listing_page(url, what, deadline)
            yield from items
            if next_url and (origin(next_url) != origin(base) or urlsplit(next_url).path != urlsplit(base).path):
                raise SourceError(f"{what}: refusing to follow a pagination link elsewhere ({display(next_url)})")
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
        except (OSError, ValueError, Transient):
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
                raise Transient(f"{what} is not JSON (a string never ends)")
            position = rest.end()
        elif mark.group() in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise Transient(f"{what} is JSON nested deeper than {MAX_JSON_DEPTH} levels")
        else:
            depth -= 1
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        snippet = body[:60].decode("utf-8", errors="replace")
        raise Transient(f"{what} is not JSON (starts {one_line(snippet, 60)!r})") from None


def _check_csv(body: bytes) -> None:
    """Trust a body only if it looks like the benchmark CSV: a UTF-8, comma-separated header with kernel_name."""
    head = body[:2048].lstrip()
    if not head:
        raise Transient("empty body, not a CSV")
    if head[:1] == b"<" or b"<html" in head.lower():
        raise Transient("an HTML page, not a CSV")
    first = body.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        header = first.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Transient("the CSV header is not UTF-8") from None
    columns = [column.strip().strip('"') for column in header.split(",")]
    if len(columns) < 2 or "kernel_name" not in columns:
        raise Transient(f"not the benchmark CSV (header: {one_line(header, 80)!r})")


def _check_json_object(body: bytes) -> None:
    if not isinstance(_parse_json(body, "the response"), dict):
        raise Transient("the response is not a JSON object")


def _check_tree(body: bytes) -> dict:
    """A git tree object: a ``tree`` list of entries, each with a string ``path`` and ``type``."""
    tree = _parse_json(body, "the tree listing")
    if not isinstance(tree, dict) or not isinstance(tree.get("tree"), list):
        raise Transient("the tree listing is not a JSON object with a tree list")
    for entry in tree["tree"]:
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("type"), str)):
            raise Transient("the tree listing has a malformed entry")
    return tree


def _check_listing(body: bytes) -> list[dict]:
    """The commit objects of one listing page, each with a 40-hex sha and a committer date."""
    items = _parse_json(body, "the commit listing")
    if not isinstance(items, list):
        raise Transient("the commit listing is not a JSON list")
    for item in items:
        try:
            sha, date = item["sha"], item["commit"]["committer"]["date"]
            if not (isinstance(sha, str) and _SHA.fullmatch(sha)):
                raise ValueError(f"bad sha {sha!r}")
            utc_iso(date)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise Transient(f"the commit listing has a malformed commit object ({one_line(str(exc), 80)})") from None
    return items
