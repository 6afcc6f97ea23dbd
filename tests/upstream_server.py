"""A real local HTTP server that serves the shipped upstream snapshots in GitHub's two shapes, with faults.

- ``GET /repos/{owner}/{name}/commits?path=P&per_page=N&page=K``: commit objects (``sha``,
  ``commit.committer.date`` = INDEX.tsv ``committed_at``), newest first, paginated with ``Link`` headers,
  weak ETags and ``304 Not Modified`` for a matching ``If-None-Match``;
- ``GET /repos/{owner}/{name}/commits/{sha}``: one commit with its ``files`` (``filename``, ``status``);
- ``GET /{owner}/{name}/{commit}/{path}``: the uncompressed CSV bytes of that snapshot.

``deleted`` adds commits that removed a file, as GitHub lists them: in the path's commit listing, 404 for
the raw file at that commit, ``status: "removed"`` in the commit's file list.

The server listens on 127.0.0.1; ``host="localhost"`` names it that way in its URLs (and pagination links),
which a client counts as another host than ``127.0.0.1``: two servers give a cross-host redirect.

Faults are queued per test with ``server.fault(kind, target=..., times=...)``; every request is recorded in
``server.requests``. Use it through the ``upstream_server`` fixture (import the fixture into the test module)
or as a context manager: ``with UpstreamServer() as server: ...``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import pytest

SNAPSHOTS = Path(__file__).resolve().parent.parent / "data" / "upstream" / "liger-kernel"
REPOSITORY = "linkedin/Liger-Kernel"

HTML_ERROR_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Unicorn! - GitHub</title></head>"
    b"<body><h1>This page is taking too long to load.</h1></body></html>\n"
)

# The kinds of fault a test can queue.
FAULT_KINDS = (
    "status",     # an error status (code=500 by default), optional Retry-After / extra headers
    "reset",      # send the headers and part of the body, then reset the connection (RST)
    "drop",       # reset the connection (RST) before sending any byte of the response
    "truncate",   # declare the full Content-Length, send only part of the body, close
    "stall",      # send the headers, then wait delay_s before the body (trips a read timeout)
    "html",       # 200 with an HTML error page instead of the content
    "garbage",    # 200 with a body that is neither CSV nor JSON (e.g. bytes that are not UTF-8)
    "oversize",   # 200 with a valid CSV of size_bytes; declare_length=False streams it without Content-Length
    "dribble",    # the response one byte every delay_s (from the status line on, with dribble_headers=True)
    "endless_pages",  # a listing page whose Link header always has a next page, past the last one
    "redirect",   # a redirect (code 302 unless a 3xx code is given) to location + the request's path and query
    "deep_json",  # 200 with JSON nested `depth` levels deep ([[[...]]])
)


@dataclass
class Fault:
    kind: str
    target: str = "any"  # "api", "raw" or "any"
    times: int | None = 1  # how many matching requests it hits; None = all of them
    match: str = ""  # only requests whose path (unquoted, with the query) contains this
    code: int = 500
    headers: dict = field(default_factory=dict)
    body: bytes | None = None
    delay_s: float = 1.0
    size_bytes: int = 0
    declare_length: bool = True
    dribble_headers: bool = False
    location: str = ""
    depth: int = 100_000
    hits: int = 0


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # unquoted path, no query
    query: dict  # first value of each query parameter
    headers: dict  # lower-cased names
    target: str  # "api" or "raw" or "other"
    fault: str | None  # the kind of fault served, if any
    at: float = 0.0  # time.monotonic() when it arrived


def load_snapshots(root: Path = SNAPSHOTS) -> list[dict]:
    with open(root / "INDEX.tsv", encoding="utf-8") as index:
        return list(csv.DictReader(index, delimiter="\t"))


def _utc(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(timezone.utc)


class UpstreamServer:
    """The shipped snapshots over HTTP on 127.0.0.1 (a free port), in a daemon thread."""

    def __init__(self, root: Path = SNAPSHOTS, repository: str = REPOSITORY, *, zulu_dates: bool = False,
                 require_token: str | None = None, max_per_page: int = 100, deleted: list[dict] | None = None,
                 host: str = "127.0.0.1"):
        self.root = Path(root)
        self.host = host  # the name in this server's URLs; it always listens on 127.0.0.1
        self.repository = repository
        self.zulu_dates = zulu_dates  # serve dates as GitHub does (UTC, "Z") rather than INDEX.tsv verbatim
        self.require_token = require_token  # when set, requests without "Bearer <token>" get 401
        self.max_per_page = max_per_page
        self.link_base: str | None = None  # when set, pagination links point there instead of at this server
        self.rows = load_snapshots(self.root)
        self.deleted = list(deleted or [])  # {"commit", "committed_at", "path"}: commits that removed the file
        self.requests: list[RecordedRequest] = []
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # ends the responses still dribbling
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._httpd.server_address[1]}"

    def start(self) -> UpstreamServer:
        self._stopping.clear()
        handler = type("Handler", (_Handler,), {"upstream": self})
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="upstream-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._stopping.set()
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    def __enter__(self) -> UpstreamServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- test controls -----------------------------------------------------------------------------------

    def fault(self, kind: str, *, target: str = "any", times: int | None = 1, **options) -> Fault:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULT_KINDS}")
        if target not in ("api", "raw", "any"):
            raise ValueError(f"unknown target {target!r}")
        added = Fault(kind, target, times, **options)
        with self._lock:
            self.faults.append(added)
        return added

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.requests.clear()

    def requests_to(self, target: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.target == target]

    def _take_fault(self, target: str, full_path: str) -> Fault | None:
        with self._lock:
            for candidate in self.faults:
                if candidate.target not in ("any", target) or candidate.match not in full_path:
                    continue
                if candidate.times is not None and candidate.hits >= candidate.times:
                    continue
                candidate.hits += 1
                return candidate
        return None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- content -----------------------------------------------------------------------------------------

    def commits_of(self, path: str) -> list[dict]:
        rows = sorted((r for r in self.rows + self.deleted if r["path"] == path),
                      key=lambda r: _utc(r["committed_at"]), reverse=True)
        owner = self.repository
        items = []
        for r in rows:
            date = r["committed_at"]
            if self.zulu_dates:
                date = _utc(date).strftime("%Y-%m-%dT%H:%M:%SZ")
            person = {"name": "Upstream Committer", "email": "committer@example.invalid", "date": date}
            items.append({
                "sha": r["commit"],
                "node_id": "C_" + r["commit"][:16],
                "commit": {"author": dict(person), "committer": person, "message": f"Update {path}"},
                "url": f"/repos/{owner}/commits/{r['commit']}",
                "html_url": f"https://github.com/{owner}/commit/{r['commit']}",
                "parents": [],
            })
        return items

    def commit_detail(self, sha: str) -> dict | None:
        """One commit as ``GET /repos/{owner}/{name}/commits/{sha}`` gives it, with its changed files."""
        removed = [{"filename": r["path"], "status": "removed"} for r in self.deleted if r["commit"] == sha]
        changed = [{"filename": r["path"], "status": "modified"} for r in self.rows if r["commit"] == sha]
        if not removed and not changed:
            return None
        return {"sha": sha, "files": changed + removed}

    def csv_bytes(self, commit: str, path: str) -> bytes | None:
        for r in self.rows:
            if r["commit"] == commit and r["path"] == path:
                data = (self.root / r["file"]).read_bytes()
                return gzip.decompress(data) if r["file"].endswith(".gz") else data
        return None


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """Clients that hang up (after a reset, a stall, a size cap) are expected here; anything else is not."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    upstream: UpstreamServer
    protocol_version = "HTTP/1.1"
    server_version = "UpstreamTestServer/1"

    def log_message(self, format, *args):  # keep pytest output quiet
        pass

    # -- routing -----------------------------------------------------------------------------------------

    def do_GET(self):
        upstream = self.upstream
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        repo_prefix = f"/repos/{upstream.repository}/"
        if path.startswith("/repos/"):
            target = "api"
        elif path.startswith(f"/{upstream.repository}/"):
            target = "raw"
        else:
            target = "other"
        fault = upstream._take_fault(target, unquote(self.path)) if target != "other" else None
        upstream._record(RecordedRequest("GET", path, query, {k.lower(): v for k, v in self.headers.items()},
                                         target, fault.kind if fault else None, time.monotonic()))
        if upstream.require_token and self.headers.get("Authorization") != f"Bearer {upstream.require_token}":
            return self._send(401, json.dumps({"message": "Bad credentials"}).encode(), "application/json")
        if target == "api" and path == repo_prefix + "commits":
            endless = fault is not None and fault.kind == "endless_pages"
            body, headers, not_modified = self._listing(query, endless=endless)
            content_type = "application/json; charset=utf-8"
            if body is None:
                return None
            if endless:
                return self._send(200, body, content_type, headers)
            if fault is None and not_modified:
                return self._send(304, b"", None, headers)
        elif target == "api" and path.startswith(repo_prefix + "commits/"):
            detail = upstream.commit_detail(path[len(repo_prefix + "commits/"):])
            if detail is None:
                return self._send(422, json.dumps({"message": "No commit found for SHA"}).encode(), "application/json")
            body, headers, content_type = json.dumps(detail).encode(), {}, "application/json; charset=utf-8"
        elif target == "raw":
            rest = path[len(upstream.repository) + 2:]
            commit, _, file_path = rest.partition("/")
            body = upstream.csv_bytes(commit, file_path)
            if body is None:
                return self._send(404, b"404: Not Found", "text/plain; charset=utf-8")
            headers, content_type = {}, "text/plain; charset=utf-8"
        else:
            return self._send(404, json.dumps({"message": "Not Found"}).encode(), "application/json")
        if fault is not None:
            return self._serve_fault(fault, body, content_type, headers)
        return self._send(200, body, content_type, headers)

    def _listing(self, query: dict, endless: bool = False) -> tuple[bytes | None, dict, bool]:
        upstream = self.upstream
        try:
            per_page = max(1, min(upstream.max_per_page, int(query.get("per_page", 30))))
            page = max(1, int(query.get("page", 1)))
        except ValueError:
            self._send(422, json.dumps({"message": "Validation Failed"}).encode(), "application/json")
            return None, {}, False
        items = upstream.commits_of(query.get("path", ""))
        last = max(1, -(-len(items) // per_page))
        body = json.dumps(items[(page - 1) * per_page: page * per_page], indent=2).encode("utf-8")
        headers = {"ETag": 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"', "Cache-Control": "private, max-age=60"}

        def link(to_page: int) -> str:
            params = {"path": query.get("path", ""), "per_page": per_page, "page": to_page}
            return f"{upstream.link_base or upstream.url}/repos/{upstream.repository}/commits?{urlencode(params)}"

        links = []
        if endless:
            links.append(f'<{link(page + 1)}>; rel="next"')
        elif page < last:
            links += [f'<{link(page + 1)}>; rel="next"', f'<{link(last)}>; rel="last"']
        if page > 1:
            links += [f'<{link(page - 1)}>; rel="prev"', f'<{link(1)}>; rel="first"']
        if links:
            headers["Link"] = ", ".join(links)
        wanted = [tag.strip() for tag in (self.headers.get("If-None-Match") or "").split(",") if tag.strip()]
        return body, headers, headers["ETag"] in wanted or "*" in wanted

    # -- responses ---------------------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, content_type: str | None, headers: dict | None = None,
              length: int | None = None):
        self.send_response(status)
        if content_type and status != 304:
            self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        if status != 304:
            self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if body and status != 304:
            self.wfile.write(body)

    def _serve_fault(self, fault: Fault, body: bytes, content_type: str, headers: dict):
        kind = fault.kind
        if kind == "status":
            default = {429: b'{"message": "API rate limit exceeded"}', 404: b'{"message": "Not Found"}'}
            payload = fault.body if fault.body is not None else default.get(fault.code, b'{"message": "Server Error"}')
            return self._send(fault.code, payload, "application/json; charset=utf-8", fault.headers)
        if kind == "html":
            return self._send(200, HTML_ERROR_PAGE, "text/html; charset=utf-8", fault.headers)
        if kind == "garbage":
            payload = fault.body if fault.body is not None else b"\xff\xfe\x00k\x00e\x00r\x00n\x00e\x00l\x00"
            return self._send(200, payload, content_type, fault.headers)
        if kind == "truncate":
            self._send_partial(body, content_type, headers)
            self.close_connection = True
            return None
        if kind in ("reset", "drop"):
            if kind == "reset":
                self._send_partial(body, content_type, headers)
            # SO_LINGER with a zero timeout: close() sends RST instead of FIN (closed here, before the
            # server's own shutdown(SHUT_WR) would send a FIN first).
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return None
        if kind == "stall":
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            for name, value in headers.items():
                self.send_header(name, str(value))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            time.sleep(fault.delay_s)
            try:
                self.wfile.write(body)
            except OSError:
                pass
            self.close_connection = True
            return None
        if kind == "oversize":
            header = body.split(b"\n", 1)[0] + b"\n"
            row = body.split(b"\n")[1] + b"\n"
            count = max(1, (fault.size_bytes - len(header)) // len(row) + 1)
            payload = header + row * count
            if fault.declare_length:
                return self._send(200, payload, content_type, headers)
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for start in range(0, len(payload), 256 * 1024):
                    self.wfile.write(payload[start:start + 256 * 1024])
            except OSError:
                pass  # the client stopped reading at its cap
            self.close_connection = True
            return None
        if kind == "redirect":
            code = fault.code if 300 <= fault.code < 400 else 302
            return self._send(code, b"", None, {**fault.headers, "Location": fault.location + self.path})
        if kind == "deep_json":
            payload = b"[" * fault.depth + b"]" * fault.depth
            return self._send(200, payload, "application/json; charset=utf-8", fault.headers)
        if kind == "dribble":
            head = (f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                    + "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n").encode("latin-1")
            if not fault.dribble_headers:
                self.wfile.write(head)
            payload = head + body if fault.dribble_headers else body
            for at in range(len(payload)):
                if self.upstream._stopping.wait(fault.delay_s):
                    break
                try:
                    self.wfile.write(payload[at: at + 1])
                except OSError:
                    break  # the client hung up
            self.close_connection = True
            return None
        raise AssertionError(kind)

    def _send_partial(self, body: bytes, content_type: str, headers: dict):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: max(1, len(body) // 3)])
        self.wfile.flush()


@pytest.fixture
def upstream_server():
    """A started UpstreamServer serving the shipped snapshots; stopped after the test."""
    with UpstreamServer() as server:
        yield server


# -- the gh-pages shapes (appended): the branch's tree, and commit listings filtered by `sha` ---------------

GH_PAGES_SNAPSHOTS = SNAPSHOTS.parent / "liger-kernel-gh-pages"


class GhPagesServer(UpstreamServer):
    """A snapshot directory laid out like ``data/upstream/liger-kernel-gh-pages`` served as a branch of GitHub.

    Adds to the shapes above:
    - ``GET /repos/{owner}/{name}/git/trees/{branch}?recursive=1``: the branch's tree at its newest commit (the
      runs whose newest INDEX.tsv row has a file, plus the branch's ``commits.txt`` / ``golden_commits.json``
      under ``benchmarks/``); an unknown ref is a 404;
    - ``GET /repos/{owner}/{name}/commits?sha=REF&path=P``: REF is the branch (every commit), a commit id
      (commits up to that one), or missing or ``main`` (the default branch, where these paths never were: ``[]``); an
      unknown REF is a 404. Pagination links keep ``sha``.
    INDEX.tsv rows with an empty ``file`` are commits that removed the path (as ``deleted`` above).
    """

    def __init__(self, root: Path = GH_PAGES_SNAPSHOTS, repository: str = REPOSITORY, *, branch: str = "gh-pages",
                 default_branch: str = "main", truncated_tree: bool = False, **options):
        super().__init__(root, repository, **options)
        self.branch = branch
        self.default_branch = default_branch  # a branch that exists but has none of these paths
        self.truncated_tree = truncated_tree  # serve the tree with "truncated": true
        removals = [r for r in self.rows if not r["file"]]
        self.rows = [r for r in self.rows if r["file"]]
        self.deleted += [{"commit": r["commit"], "committed_at": r["committed_at"], "path": r["path"]}
                         for r in removals]

    def start(self) -> GhPagesServer:
        self._stopping.clear()
        handler = type("Handler", (_GhPagesHandler,), {"upstream": self})
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="gh-pages-server", daemon=True)
        self._thread.start()
        return self

    def head_paths(self) -> list[str]:
        """The paths present at the branch's newest commit: those whose newest row is not a removal."""
        newest: dict[str, tuple[datetime, bool]] = {}
        for r in self.rows + self.deleted:
            at, present = _utc(r["committed_at"]), bool(r.get("file"))
            if r["path"] not in newest or at > newest[r["path"]][0]:
                newest[r["path"]] = (at, present)
        return sorted(path for path, (_, present) in newest.items() if present)

    def head_commit(self) -> str:
        return max(self.rows + self.deleted, key=lambda r: _utc(r["committed_at"]))["commit"]

    def csv_bytes(self, commit: str, path: str) -> bytes | None:
        """A run at a commit, or a branch file at the branch's head (``benchmarks/golden_commits.json``)."""
        name = path.removeprefix("benchmarks/")
        if commit in (self.branch, self.head_commit()) and name in ("commits.txt", "golden_commits.json"):
            return (self.root / name).read_bytes() if (self.root / name).is_file() else None
        return super().csv_bytes(commit, path)

    def tree(self) -> dict:
        entries, folders = [], set()
        files = [(p, self.csv_bytes(self._newest_commit(p), p)) for p in self.head_paths()]
        files += [(f"benchmarks/{name}", (self.root / name).read_bytes())
                  for name in ("commits.txt", "golden_commits.json") if (self.root / name).is_file()]
        for path, data in sorted(files):
            parts = path.split("/")
            for depth in range(1, len(parts)):
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    folders.add(folder)
                    entries.append({"path": folder, "mode": "040000", "type": "tree",
                                    "sha": hashlib.sha1(folder.encode()).hexdigest()})
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            entries.append({"path": path, "mode": "100644", "type": "blob", "sha": blob, "size": len(data)})
        return {"sha": hashlib.sha1(self.head_commit().encode()).hexdigest(), "tree": entries,
                "truncated": self.truncated_tree}

    def _newest_commit(self, path: str) -> str:
        return max((r for r in self.rows if r["path"] == path), key=lambda r: _utc(r["committed_at"]))["commit"]

    def commits_at(self, ref: str | None, path: str) -> list[dict] | None:
        """The listing of `path` as of `ref` (None: an unknown ref)."""
        if ref is None or ref == self.default_branch:
            return []
        items = self.commits_of(path)
        if ref == self.branch:
            return items
        known = {r["commit"]: _utc(r["committed_at"]) for r in self.rows + self.deleted}
        if ref not in known:
            return None
        return [item for item in items if _utc(item["commit"]["committer"]["date"]) <= known[ref]]


class _GhPagesHandler(_Handler):
    upstream: GhPagesServer

    def do_GET(self):
        upstream = self.upstream
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        tree_prefix = f"/repos/{upstream.repository}/git/trees/"
        if not (path.startswith(tree_prefix) or path == f"/repos/{upstream.repository}/commits"):
            return super().do_GET()
        fault = upstream._take_fault("api", unquote(self.path))
        upstream._record(RecordedRequest("GET", path, query, {k.lower(): v for k, v in self.headers.items()},
                                         "api", fault.kind if fault else None, time.monotonic()))
        if upstream.require_token and self.headers.get("Authorization") != f"Bearer {upstream.require_token}":
            return self._send(401, json.dumps({"message": "Bad credentials"}).encode(), "application/json")
        content_type = "application/json; charset=utf-8"
        headers: dict = {}
        if path.startswith(tree_prefix):
            if path[len(tree_prefix):] not in (upstream.branch, upstream.head_commit()):
                return self._send(404, json.dumps({"message": "Not Found"}).encode(), "application/json")
            body = json.dumps(upstream.tree(), indent=2).encode("utf-8")
        else:
            items = upstream.commits_at(query.get("sha"), query.get("path", ""))
            if items is None:
                message = {"message": f"No commit found for SHA: {query.get('sha')}"}
                return self._send(404, json.dumps(message).encode(), "application/json")
            try:
                per_page = max(1, min(upstream.max_per_page, int(query.get("per_page", 30))))
                page = max(1, int(query.get("page", 1)))
            except ValueError:
                return self._send(422, json.dumps({"message": "Validation Failed"}).encode(), "application/json")
            last = max(1, -(-len(items) // per_page))
            body = json.dumps(items[(page - 1) * per_page: page * per_page], indent=2).encode("utf-8")
            headers["ETag"] = 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"'

            def link(to_page: int) -> str:
                params = {k: v for k, v in (("sha", query.get("sha")), ("path", query.get("path", "")),
                                            ("per_page", per_page), ("page", to_page)) if v is not None}
                return f"{upstream.link_base or upstream.url}/repos/{upstream.repository}/commits?{urlencode(params)}"

            endless = fault is not None and fault.kind == "endless_pages"
            links = [f'<{link(page + 1)}>; rel="next"'] if endless or page < last else []
            if page > 1:
                links.append(f'<{link(page - 1)}>; rel="prev"')
            if links:
                headers["Link"] = ", ".join(links)
            if endless:
                return self._send(200, body, content_type, headers)
            wanted = [t.strip() for t in (self.headers.get("If-None-Match") or "").split(",") if t.strip()]
            if fault is None and headers["ETag"] in wanted:
                return self._send(304, b"", None, headers)
        if fault is not None:
            return self._serve_fault(fault, body, content_type, headers)
        return self._send(200, body, content_type, headers)


@pytest.fixture
def gh_pages_server():
    """A started GhPagesServer serving the shipped gh-pages snapshots; stopped after the test."""
    with GhPagesServer() as server:
        yield server
