"""GitHubSource against a real local HTTP server that serves the shipped snapshots, with injected faults."""

from __future__ import annotations

import json
import logging
import socket
import time
from pathlib import Path

import pytest
from upstream_server import SNAPSHOTS, UpstreamServer, upstream_server  # noqa: F401 (fixture)

from kernelindex_pipeline.ingest.sources import DirectorySource, GitHubSource, SourceError, open_source

TOKEN = "ghp_TESTtoken0123456789abcdefNEVERshown"
MAX_RETRIES = 3


def fields(revisions):
    return [(r.key, r.commit, r.committed_at, r.path) for r in revisions]


@pytest.fixture(scope="module")
def directory():
    return DirectorySource(str(SNAPSHOTS))


@pytest.fixture
def waits():
    return []


@pytest.fixture
def make_source(upstream_server, waits, monkeypatch):  # noqa: F811
    """GitHubSource on the test server with fast backoff; every wait is recorded (and slept, briefly)."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    made = []

    def make(**options):
        options = {"backoff_s": 0.01, "backoff_cap_s": 5.0, "timeout_s": 2.0, "max_retries": MAX_RETRIES,
                   **options}
        source = GitHubSource(upstream_server.url, **options)

        def sleep(seconds):
            waits.append(seconds)
            time.sleep(min(seconds, 0.02))

        source.sleep = sleep
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()


def newest(directory, stream="all_benchmark_data"):
    return [r for r in directory.list_revisions() if r.stream == stream][-1]


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


# -- listing and reading ------------------------------------------------------------------------------


def test_listing_equals_directory_source_across_pages(make_source, upstream_server, directory):  # noqa: F811
    source = make_source(per_page=4)
    revisions = source.list_revisions()
    assert fields(revisions) == fields(directory.list_revisions())
    assert {r.location for r in revisions} == {upstream_server.url}
    pages = [r.query for r in upstream_server.requests_to("api")]
    main_pages = [int(q["page"]) for q in pages if q["path"] == "benchmark/data/all_benchmark_data.csv"]
    assert main_pages == list(range(1, 10))  # 34 commits, 4 a page: the Link "next" chain was followed
    assert all(q["per_page"] == "4" for q in pages)


def test_listing_with_github_style_utc_dates(directory):
    with UpstreamServer(zulu_dates=True) as server, GitHubSource(server.url, backoff_s=0.01) as source:
        assert fields(source.list_revisions()) == fields(directory.list_revisions())


def test_every_revision_reads_the_same_bytes_as_the_directory(make_source, directory):
    source = make_source()
    for revision in source.list_revisions():
        assert source.read(revision) == directory.read(revision), revision.key


def test_open_source_gives_a_github_source_for_urls(upstream_server, directory):  # noqa: F811
    source = open_source(upstream_server.url, backoff_s=0.01, per_page=50)
    assert isinstance(source, GitHubSource)
    assert fields(source.list_revisions()) == fields(directory.list_revisions())


def test_github_location_form():
    source = GitHubSource("github:someone/Some-Repo")
    assert source.repository == "someone/Some-Repo"
    assert source.api_url == "https://api.github.com"
    assert source.raw_url == "https://raw.githubusercontent.com"
    with pytest.raises(SourceError, match="not a repository name"):
        GitHubSource("github:not a repo")
    with pytest.raises(SourceError, match="not a GitHub location"):
        GitHubSource("ftp://example.invalid/x")


def test_a_path_without_commits_lists_nothing(make_source):
    assert make_source(paths=("benchmark/data/no_such_file.csv",)).list_revisions() == []


def test_unknown_repository_is_a_clear_error(make_source, upstream_server):  # noqa: F811
    with pytest.raises(SourceError) as excinfo:
        make_source(repository="someone/elsewhere").list_revisions()
    assert "HTTP 404" in one_line_error(excinfo)
    assert len(upstream_server.requests_to("api")) == 1  # a 404 is not retried


# -- conditional listing (ETag / 304) -----------------------------------------------------------------


def test_second_listing_is_answered_304_from_the_etag_cache(make_source, upstream_server, directory):  # noqa: F811
    source = make_source(per_page=10)
    first = source.list_revisions()
    count = len(upstream_server.requests)
    assert all("if-none-match" not in r.headers for r in upstream_server.requests)
    second = source.list_revisions()
    again = upstream_server.requests[count:]
    assert len(again) == count and all(r.headers.get("if-none-match", "").startswith('W/"') for r in again)
    assert second == first
    assert fields(second) == fields(directory.list_revisions())


def test_etag_cache_on_disk_survives_a_new_source(make_source, upstream_server, tmp_path):  # noqa: F811
    first = make_source(per_page=10, cache_dir=tmp_path).list_revisions()
    assert list((tmp_path / "github-etags").glob("*.json"))
    upstream_server.clear()
    second = make_source(per_page=10, cache_dir=tmp_path).list_revisions()
    assert second == first
    assert upstream_server.requests and all("if-none-match" in r.headers for r in upstream_server.requests)


def test_a_corrupt_cache_entry_is_ignored(make_source, upstream_server, tmp_path, directory):  # noqa: F811
    make_source(per_page=50, cache_dir=tmp_path).list_revisions()
    for entry in (tmp_path / "github-etags").glob("*.json"):
        entry.write_text("{not json", encoding="utf-8")
    upstream_server.clear()
    revisions = make_source(per_page=50, cache_dir=tmp_path).list_revisions()
    assert fields(revisions) == fields(directory.list_revisions())
    assert all("if-none-match" not in r.headers for r in upstream_server.requests)


# -- faults on the raw file -----------------------------------------------------------------------------

RECOVERABLE_RAW = {
    "3x500": dict(kind="status", code=500, times=3),
    "502": dict(kind="status", code=502, times=1),
    "429 Retry-After": dict(kind="status", code=429, headers={"Retry-After": "1"}),
    "403 rate limit": dict(kind="status", code=403, headers={"X-RateLimit-Remaining": "0",
                                                              "X-RateLimit-Reset": str(int(time.time()) + 1)}),
    "connection reset mid-body": dict(kind="reset", times=2),
    "connection reset before response": dict(kind="drop", times=2),
    "truncated body": dict(kind="truncate", times=2),
    "stalled body": dict(kind="stall", delay_s=1.0),
    "200 HTML page": dict(kind="html", times=2),
    "not UTF-8": dict(kind="garbage"),
}


@pytest.mark.parametrize("fault", RECOVERABLE_RAW.values(), ids=RECOVERABLE_RAW.keys())
def test_raw_fault_recovers_after_retries(fault, make_source, upstream_server, directory, waits):  # noqa: F811
    fault = dict(fault)
    upstream_server.fault(fault.pop("kind"), target="raw", **fault)
    revision = newest(directory)
    source = make_source(timeout_s=0.3)
    assert source.read(revision) == directory.read(revision)
    raw = upstream_server.requests_to("raw")
    assert [r.fault is not None for r in raw] == [True] * (len(raw) - 1) + [False]
    assert len(raw) == 1 + fault.get("times", 1)
    assert len(waits) == len(raw) - 1


def test_retry_after_is_honoured_and_capped(make_source, upstream_server, directory, waits):  # noqa: F811
    upstream_server.fault("status", code=429, target="raw", headers={"Retry-After": "2"})
    upstream_server.fault("status", code=503, target="raw", headers={"Retry-After": "3600"})
    revision = newest(directory)
    assert make_source(backoff_cap_s=3.0).read(revision) == directory.read(revision)
    assert waits == [2.0, 3.0]  # the server's 2 s, then 3600 s capped at backoff_cap_s


def test_backoff_is_exponential_and_bounded(make_source, upstream_server, directory, waits):  # noqa: F811
    upstream_server.fault("status", code=500, target="raw", times=None)
    with pytest.raises(SourceError) as excinfo:
        make_source(backoff_s=0.01, max_retries=4).read(newest(directory))
    assert waits == pytest.approx([0.01, 0.02, 0.04, 0.08])
    assert "after 5 attempts" in one_line_error(excinfo)
    assert len(upstream_server.requests_to("raw")) == 5


PERSISTENT_RAW = {
    "500 forever": (dict(kind="status", code=500, times=None), "HTTP 500"),
    "429 forever": (dict(kind="status", code=429, times=None, headers={"Retry-After": "1"}), "rate limited"),
    "reset forever": (dict(kind="reset", times=None), "connection reset"),
    "drop forever": (dict(kind="drop", times=None), "connection reset"),
    "truncated forever": (dict(kind="truncate", times=None), "cut short"),
    "stall forever": (dict(kind="stall", times=None, delay_s=1.0), "timed out"),
    "HTML forever": (dict(kind="html", times=None), "HTML page"),
    "not UTF-8 forever": (dict(kind="garbage", times=None), "not UTF-8"),
    "other CSV": (dict(kind="garbage", times=None, body=b"a,b,c\n1,2,3\n"), "not the benchmark CSV"),
    "empty body": (dict(kind="garbage", times=None, body=b""), "empty body"),
}


@pytest.mark.parametrize("fault,reason", PERSISTENT_RAW.values(), ids=PERSISTENT_RAW.keys())
def test_persistent_raw_fault_is_a_one_line_source_error(fault, reason, make_source, upstream_server, directory):  # noqa: F811
    fault = dict(fault)
    upstream_server.fault(fault.pop("kind"), target="raw", **fault)
    revision = newest(directory)
    with pytest.raises(SourceError) as excinfo:
        make_source(timeout_s=0.3, max_retries=2).read(revision)
    message = one_line_error(excinfo)
    assert reason in message and "after 3 attempts" in message and revision.commit[:12] in message
    assert len(upstream_server.requests_to("raw")) == 3


@pytest.mark.parametrize("declare_length", [True, False], ids=["with Content-Length", "streamed"])
def test_a_body_over_the_size_cap_is_refused_without_retry(declare_length, make_source, upstream_server,  # noqa: F811
                                                           directory):
    upstream_server.fault("oversize", target="raw", times=None, size_bytes=3 * 2**20,
                          declare_length=declare_length)
    with pytest.raises(SourceError) as excinfo:
        make_source(max_bytes=2**20).read(newest(directory))
    assert "over the 1048576-byte cap" in one_line_error(excinfo)
    assert len(upstream_server.requests_to("raw")) == 1


def test_a_body_within_the_cap_is_read(make_source, upstream_server, directory):  # noqa: F811
    revision = newest(directory)
    expected = directory.read(revision)
    assert make_source(max_bytes=len(expected)).read(revision) == expected
    with pytest.raises(SourceError, match="cap"):
        make_source(max_bytes=len(expected) - 1).read(revision)


def test_a_missing_file_is_404_without_retry(make_source, upstream_server, directory):  # noqa: F811
    revision = newest(directory)
    gone = type(revision)(revision.committed_at, revision.stream, "0" * 40, revision.path, revision.location)
    with pytest.raises(SourceError) as excinfo:
        make_source().read(gone)
    assert "HTTP 404" in one_line_error(excinfo)
    upstream_server.fault("status", code=404, target="raw")
    with pytest.raises(SourceError, match="not found"):
        make_source().read(revision)
    assert len(upstream_server.requests_to("raw")) == 2


def test_an_unreachable_server_is_a_one_line_source_error(directory, waits):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the probe closes
    source = GitHubSource(f"http://127.0.0.1:{port}", backoff_s=0.01, max_retries=2, timeout_s=1)
    with pytest.raises(SourceError) as excinfo:
        source.read(newest(directory))
    message = one_line_error(excinfo)
    assert "connection refused" in message and "after 3 attempts" in message and len(message) < 300


# -- faults on the commit listing -------------------------------------------------------------------------

RECOVERABLE_API = {
    "2x500": dict(kind="status", code=500, times=2),
    "429 Retry-After": dict(kind="status", code=429, headers={"Retry-After": "1"}),
    "connection reset": dict(kind="reset"),
    "connection dropped": dict(kind="drop"),
    "truncated JSON": dict(kind="truncate"),
    "200 HTML page": dict(kind="html"),
    "not JSON": dict(kind="garbage", body=b'{"message": "Server Error"}'),
}


@pytest.mark.parametrize("fault", RECOVERABLE_API.values(), ids=RECOVERABLE_API.keys())
def test_listing_fault_recovers_after_retries(fault, make_source, upstream_server, directory):  # noqa: F811
    fault = dict(fault)
    upstream_server.fault(fault.pop("kind"), target="api", match="page=2", **fault)
    assert fields(make_source(per_page=10).list_revisions()) == fields(directory.list_revisions())
    assert sum(r.fault is not None for r in upstream_server.requests_to("api")) == fault.get("times", 1)


@pytest.mark.parametrize("kind,reason", [("status", "HTTP 500"), ("html", "not JSON"), ("truncate", "cut short")])
def test_persistent_listing_fault_is_a_one_line_source_error(kind, reason, make_source, upstream_server):  # noqa: F811
    upstream_server.fault(kind, target="api", times=None)
    with pytest.raises(SourceError) as excinfo:
        make_source(max_retries=1).list_revisions()
    message = one_line_error(excinfo)
    assert reason in message and "commit listing of benchmark/data/all_benchmark_data.csv" in message


def test_pagination_links_to_another_host_are_not_followed(make_source, upstream_server, monkeypatch):  # noqa: F811
    upstream_server.link_base = "http://attacker.invalid"
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    with pytest.raises(SourceError) as excinfo:
        make_source(per_page=10).list_revisions()
    assert "refusing to follow" in one_line_error(excinfo) and TOKEN not in str(excinfo.value)
    assert len(upstream_server.requests) == 1


# -- the token ------------------------------------------------------------------------------------------


def test_token_is_sent_to_the_api_and_the_raw_host(monkeypatch, directory):
    monkeypatch.setenv("KI_TEST_TOKEN", TOKEN)
    with UpstreamServer(require_token=TOKEN) as server:
        source = GitHubSource(server.url, token_env="KI_TEST_TOKEN", backoff_s=0.01, per_page=20)
        revisions = source.list_revisions()
        assert fields(revisions) == fields(directory.list_revisions())
        assert source.read(revisions[-1]) == directory.read(revisions[-1])
        assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {TOKEN}"}
        assert TOKEN not in repr(source)


def test_no_token_means_no_authorization_header(make_source, upstream_server):  # noqa: F811
    make_source(per_page=50).list_revisions()
    assert all("authorization" not in r.headers for r in upstream_server.requests)


def test_token_never_appears_in_errors_or_logs(monkeypatch, directory, caplog):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)
    messages = []
    with UpstreamServer(require_token="a-different-token") as server:
        source = GitHubSource(server.url, backoff_s=0.01, max_retries=1)
        with pytest.raises(SourceError) as rejected:
            source.list_revisions()
        messages.append(one_line_error(rejected))
        assert "HTTP 401" in messages[-1] and "GITHUB_TOKEN" in messages[-1]
        assert len(server.requests) == 1  # a rejected token is not retried
    with UpstreamServer() as server:
        source = GitHubSource(server.url, backoff_s=0.01, max_retries=1)
        for kind in ("status", "reset", "html", "truncate"):
            server.clear()
            server.fault(kind, target="raw", times=None)
            with pytest.raises(SourceError) as failed:
                source.read(newest(directory))
            messages.append(one_line_error(failed))
            assert server.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert len(messages) == 5
    assert all(TOKEN not in m for m in messages)
    assert caplog.records and all(TOKEN not in r.getMessage() for r in caplog.records)


def test_server_fixture_records_and_serves_both_shapes(upstream_server):  # noqa: F811
    import requests

    listing = requests.get(f"{upstream_server.url}/repos/linkedin/Liger-Kernel/commits",
                           params={"path": "benchmark/data/all_benchmark_data_cutile.csv", "per_page": 2},
                           timeout=5)
    assert listing.status_code == 200 and 'rel="next"' in listing.headers["Link"]
    first = json.loads(listing.content)
    assert len(first) == 2 and first[0]["commit"]["committer"]["date"] >= first[1]["commit"]["committer"]["date"]
    again = requests.get(listing.url, headers={"If-None-Match": listing.headers["ETag"]}, timeout=5)
    assert again.status_code == 304 and again.content == b""
    row = next(r for r in upstream_server.rows if r["path"].endswith("_cutile.csv"))
    raw = requests.get(f"{upstream_server.url}/linkedin/Liger-Kernel/{row['commit']}/{row['path']}", timeout=5)
    assert raw.status_code == 200 and raw.content.startswith(b"kernel_name,")
    assert [r.target for r in upstream_server.requests] == ["api", "api", "raw"]
    assert Path(SNAPSHOTS, row["file"]).is_file()


# -- a listed commit that deleted the file ---------------------------------------------------------------


DELETION = {"commit": "d" * 40, "committed_at": "2026-09-01T00:00:00+00:00",
            "path": "benchmark/data/all_benchmark_data.csv"}


def test_a_commit_that_deleted_the_file_is_a_distinct_error(directory):
    from kernelindex_pipeline.ingest.sources import FileDeletedAtRevision

    with UpstreamServer(deleted=[DELETION]) as server, GitHubSource(server.url, backoff_s=0.01) as source:
        revisions = source.list_revisions()
        assert len(revisions) == len(directory.list_revisions()) + 1
        gone = [r for r in revisions if r.commit == DELETION["commit"]]
        assert len(gone) == 1
        with pytest.raises(FileDeletedAtRevision) as excinfo:
            source.read(gone[0])
        assert "deleted benchmark/data/all_benchmark_data.csv" in one_line_error(excinfo)
        assert [r.path for r in server.requests_to("api")][-1] == f"/repos/{server.repository}/commits/{'d' * 40}"
        # the others still read
        assert source.read(newest(directory)) == directory.read(newest(directory))


def test_a_404_at_a_commit_that_did_not_delete_the_file_stays_a_failure(make_source, upstream_server, directory):  # noqa: F811
    from kernelindex_pipeline.ingest.sources import FileDeletedAtRevision

    revision = newest(directory)
    upstream_server.fault("status", code=404, target="raw")
    with pytest.raises(SourceError) as excinfo:
        make_source().read(revision)
    assert not isinstance(excinfo.value, FileDeletedAtRevision)
    assert "HTTP 404" in one_line_error(excinfo)
    # the commit lookup failing too (e.g. the API is down) also keeps it a failure
    upstream_server.fault("status", code=404, target="raw")
    upstream_server.fault("status", code=500, target="api", times=None)
    with pytest.raises(SourceError) as excinfo:
        make_source().read(revision)
    assert not isinstance(excinfo.value, FileDeletedAtRevision)
