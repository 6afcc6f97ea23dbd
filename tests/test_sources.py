"""Sources facing hostile input: real files in tmp_path and a real HTTP server on 127.0.0.1, no mocks.

Every failure is a one-line SourceError that says why; nothing crashes, hangs or reads past a cap.
"""

from __future__ import annotations

import csv
import gzip
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from upstream_server import SNAPSHOTS, UpstreamServer, upstream_server  # noqa: F401 (fixture)

from kernelindex_pipeline.ingest.sources import (
    SOURCE_NAME,
    UPSTREAM_PATHS,
    UPSTREAM_REPOSITORY,
    DirectorySource,
    FileDeletedAtRevision,
    GitHubSource,
    Revision,
    Source,
    SourceError,
    open_source,
    stream_of,
    utc_iso,
)

REPO = Path(__file__).resolve().parent.parent
MAIN_PATH = UPSTREAM_PATHS[0]
COMMIT = "c" * 40
TOKEN = "ghp_TESTtoken0123456789abcdefNEVERshown"
MiB = 2**20


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert message and "\n" not in message and "Traceback" not in message
    message.encode("utf-8")  # printable as it is
    return message


def write_index(root: Path, rows: list[tuple[str, str, str, str]]) -> None:
    with open(root / "INDEX.tsv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["commit", "committed_at", "path", "file"])
        writer.writerows(rows)


def one_entry(root: Path, file: str) -> DirectorySource:
    """A directory source whose INDEX.tsv lists one revision of the main file, stored in `file`."""
    root.mkdir(parents=True, exist_ok=True)
    write_index(root, [(COMMIT, "2026-01-02T03:04:05+00:00", MAIN_PATH, file)])
    return DirectorySource(str(root))


def read_one(source: DirectorySource) -> bytes:
    (revision,) = source.list_revisions()
    return source.read(revision)


@pytest.fixture(scope="module")
def shipped():
    return DirectorySource(str(SNAPSHOTS))


def newest(source) -> Revision:
    return [r for r in source.list_revisions() if r.path == MAIN_PATH][-1]


# -- the package's names ------------------------------------------------------------------------------------


def test_the_names_other_modules_import():
    assert SOURCE_NAME and UPSTREAM_REPOSITORY == "linkedin/Liger-Kernel" and MAIN_PATH.endswith(".csv")
    assert issubclass(FileDeletedAtRevision, SourceError)
    assert stream_of(MAIN_PATH) == "all_benchmark_data"
    assert utc_iso("2026-01-02T05:04:05+02:00") == "2026-01-02T03:04:05+00:00"
    assert isinstance(open_source(str(SNAPSHOTS)), DirectorySource)
    assert isinstance(DirectorySource(str(SNAPSHOTS)), Source)
    with GitHubSource("github:someone/repo") as github:
        assert isinstance(github, Source)


# -- directory: the index -----------------------------------------------------------------------------------


def test_the_index_is_read_once_per_source(tmp_path, shipped):
    root = shutil.copytree(SNAPSHOTS, tmp_path / "snapshots")
    source = DirectorySource(str(root))
    revisions = source.list_revisions()
    expected = shipped.list_revisions()
    assert revisions == [Revision(r.committed_at, r.stream, r.commit, r.path, str(root)) for r in expected]
    (root / "INDEX.tsv").unlink()  # every read below finds its file without the index
    for revision in revisions:
        assert source.read(revision) == shipped.read(revision)
    with pytest.raises(SourceError, match="INDEX.tsv"):
        DirectorySource(str(root)).list_revisions()


@pytest.mark.parametrize("index,reason", [
    (b"commit\tcommitted_at\tpath\n", "no column file"),
    (b"commit\tcommitted_at\tpath\tfile\n" + f"{COMMIT}\tyesterday\t{MAIN_PATH}\tx.csv.gz\n".encode(),
     "committed_at 'yesterday' is not an ISO 8601 time"),
    (b"commit\tcommitted_at\tpath\tfile\n" + f"{COMMIT}\t2026-01-02\t{MAIN_PATH}\n".encode(), "fewer than 4 columns"),
    ("commit\tcommitted_at\tpath\tfile\n".encode("utf-16"), "is not UTF-8 (line 1, byte 0xff)"),
    (b"commit\tcommitted_at\tpath\tfile\n" + f"{COMMIT}\t2026-01-02\t".encode() + b"benchmark/\xe9.csv\tx.csv.gz\n",
     "is not UTF-8 (line 2, byte 0xe9)"),
], ids=["no file column", "bad time", "short row", "UTF-16", "latin-1 path"])
def test_a_malformed_index_is_a_reason(index, reason, tmp_path):
    (tmp_path / "INDEX.tsv").write_bytes(index)
    with pytest.raises(SourceError) as excinfo:
        DirectorySource(str(tmp_path)).list_revisions()
    assert reason in one_line_error(excinfo)


def test_a_missing_index_or_directory_is_a_reason(tmp_path):
    with pytest.raises(SourceError, match="INDEX.tsv: cannot read it: No such file"):
        DirectorySource(str(tmp_path)).list_revisions()
    with pytest.raises(SourceError, match="cannot read the snapshot directory .*No such file"):
        DirectorySource(str(tmp_path / "absent")).list_revisions()


def test_a_revision_not_in_the_index_is_a_reason(tmp_path, shipped):
    source = one_entry(tmp_path, "x.csv.gz")
    with pytest.raises(SourceError) as excinfo:
        source.read(newest(shipped))
    assert "is not listed in" in one_line_error(excinfo)


# -- directory: only files inside it ----------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path) -> Path:
    """A valid snapshot outside the source directory."""
    target = tmp_path / "outside" / "secret.csv.gz"
    target.parent.mkdir()
    target.write_bytes(gzip.compress(b"kernel_name,x\nsecret,1\n"))
    return target


@pytest.mark.parametrize("entry,reason", [
    ("../outside/secret.csv.gz", "points outside"),
    ("sub/../../outside/secret.csv.gz", "points outside"),
    ("ABSOLUTE", "points outside"),
    ("", "is empty"),
    ("nul\0.csv.gz", "contains a NUL character"),
], ids=["dot-dot", "dot-dot inside", "absolute", "empty", "NUL"])
def test_a_file_entry_that_leaves_the_directory_is_refused(entry, reason, tmp_path, outside):
    entry = str(outside) if entry == "ABSOLUTE" else entry
    source = one_entry(tmp_path / "source", entry)
    with pytest.raises(SourceError) as excinfo:
        read_one(source)
    message = one_line_error(excinfo)
    assert reason in message and "file entry" in message and "INDEX.tsv line 2" in message


def test_a_symlink_that_leads_outside_is_refused(tmp_path, outside):
    root = tmp_path / "source"
    root.mkdir()
    (root / "link.csv.gz").symlink_to(outside)
    (root / "linked-dir").symlink_to(outside.parent, target_is_directory=True)
    for entry in ("link.csv.gz", "linked-dir/secret.csv.gz"):
        with pytest.raises(SourceError) as excinfo:
            read_one(one_entry(root, entry))
        message = one_line_error(excinfo)
        assert f"file entry '{entry}'" in message and "resolves outside" in message


def test_a_symlink_inside_the_directory_is_read(tmp_path, shipped):
    revision = newest(shipped)
    root = tmp_path / "source"
    root.mkdir()
    stored = next(r["file"] for r in csv.DictReader(open(SNAPSHOTS / "INDEX.tsv", encoding="utf-8"), delimiter="\t")
                  if r["commit"] == revision.commit and r["path"] == revision.path)
    shutil.copy(SNAPSHOTS / stored, root / "real.csv.gz")
    (root / "alias.csv.gz").symlink_to("real.csv.gz")
    write_index(root, [(revision.commit, revision.committed_at, revision.path, "alias.csv.gz")])
    assert DirectorySource(str(root)).read(revision) == shipped.read(revision)


def test_a_fifo_or_a_directory_is_refused_without_waiting(tmp_path):
    root = tmp_path / "source"
    root.mkdir()
    os.mkfifo(root / "pipe.csv.gz")
    (root / "folder.csv.gz").mkdir()
    for entry in ("pipe.csv.gz", "folder.csv.gz"):
        started = time.monotonic()
        with pytest.raises(SourceError) as excinfo:
            read_one(one_entry(root, entry))
        assert "not a regular file" in one_line_error(excinfo) and time.monotonic() - started < 2


def test_a_missing_file_is_a_reason(tmp_path):
    with pytest.raises(SourceError) as excinfo:
        read_one(one_entry(tmp_path, "gone.csv.gz"))
    assert "file entry 'gone.csv.gz'" in one_line_error(excinfo) and "No such file" in str(excinfo.value)


# -- directory: names that are not UTF-8 ------------------------------------------------------------------


def test_a_file_entry_that_is_not_utf8_is_refused(tmp_path):
    root = tmp_path / "source"
    root.mkdir()
    name = b"\xff.csv.gz"
    with open(os.path.join(os.fsencode(root), name), "wb") as handle:  # the file exists and is valid
        handle.write(gzip.compress(b"kernel_name,x\na,1\n"))
    (root / "INDEX.tsv").write_bytes(b"commit\tcommitted_at\tpath\tfile\n"
                                     + f"{COMMIT}\t2026-01-02T03:04:05+00:00\t{MAIN_PATH}\t".encode() + name + b"\n")
    with pytest.raises(SourceError) as excinfo:
        DirectorySource(str(root)).list_revisions()
    message = one_line_error(excinfo)
    assert "line 2: file entry '\\xff.csv.gz' is not a UTF-8 name" in message


def test_a_directory_name_that_is_not_utf8_is_refused(tmp_path):
    root = os.path.join(os.fsencode(tmp_path), b"snap\xfeshots")
    os.mkdir(root)
    with pytest.raises(SourceError) as excinfo:
        DirectorySource(os.fsdecode(root))
    assert "not UTF-8" in one_line_error(excinfo) and "snap\\xfeshots" in str(excinfo.value)


def test_a_symlink_to_a_file_with_a_non_utf8_name_reads(tmp_path):
    root = tmp_path / "source"
    root.mkdir()
    with open(os.path.join(os.fsencode(root), b"\xff.csv.gz"), "wb") as handle:
        handle.write(gzip.compress(b"kernel_name,x\na,1\n"))
    os.symlink(b"\xff.csv.gz", os.path.join(os.fsencode(root), b"plain.csv.gz"))
    assert read_one(one_entry(root, "plain.csv.gz")) == b"kernel_name,x\na,1\n"


# -- directory: decompression ----------------------------------------------------------------------------


def write_bomb(path: Path, inflated: int = 2**30) -> None:
    """A gzip file of about 1 MB that inflates to `inflated` bytes of zeros (members of 16 MiB each)."""
    member = gzip.compress(bytes(16 * MiB), compresslevel=9)
    path.write_bytes(member * (inflated // (16 * MiB)))


BOMB_CHILD = textwrap.dedent("""
    import resource, sys, time
    from kernelindex_pipeline.ingest.sources import DirectorySource, SourceError
    source = DirectorySource(sys.argv[1])
    (revision,) = source.list_revisions()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.process_time()  # CPU time: what the read costs, whatever else the machine runs
    try:
        source.read(revision)
        outcome = "read"
    except SourceError as exc:
        outcome = str(exc)
    seconds = time.process_time() - started
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(f"{grown_kib}\\t{seconds}\\t{outcome}")
""")


def test_a_gzip_bomb_fails_fast_with_bounded_memory(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    write_bomb(source / "bomb.csv.gz")
    assert (source / "bomb.csv.gz").stat().st_size < 2 * MiB
    one_entry(source, "bomb.csv.gz")
    env = {k: v for k, v in os.environ.items() if k != "KERNELINDEX_MAX_SNAPSHOT_BYTES"}
    child = subprocess.run([sys.executable, "-c", BOMB_CHILD, str(source)], capture_output=True, text=True,
                           timeout=60, cwd=REPO, env=env)
    assert child.returncode == 0, child.stderr
    grown_kib, seconds, outcome = child.stdout.strip().split("\t")
    assert "decompresses to more than the 268435456-byte cap" in outcome and "bomb.csv.gz" in outcome
    assert int(grown_kib) * 1024 < 400e6, f"peak memory grew by {int(grown_kib) // 1024} MiB"
    assert float(seconds) < 4


def test_the_snapshot_cap_is_settable(tmp_path, monkeypatch, shipped):
    revision = newest(shipped)
    size = len(shipped.read(revision))
    monkeypatch.setenv("KERNELINDEX_MAX_SNAPSHOT_BYTES", str(size))
    assert DirectorySource(str(SNAPSHOTS)).read(revision) == shipped.read(revision)
    monkeypatch.setenv("KERNELINDEX_MAX_SNAPSHOT_BYTES", str(size - 1))
    with pytest.raises(SourceError) as excinfo:
        DirectorySource(str(SNAPSHOTS)).read(revision)
    assert f"more than the {size - 1}-byte cap ($KERNELINDEX_MAX_SNAPSHOT_BYTES)" in one_line_error(excinfo)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "x.csv").write_bytes(b"kernel_name,x\n" + b"a,1\n" * 100)
    with pytest.raises(SourceError, match="over the 413-byte cap"):
        read_one(DirectorySource(str(one_entry(plain, "x.csv").root), max_bytes=413))
    assert read_one(DirectorySource(str(plain), max_bytes=414)) == b"kernel_name,x\n" + b"a,1\n" * 100


@pytest.mark.parametrize("value", ["abc", "-5", "1.5", "0"])
def test_a_snapshot_cap_that_is_not_a_count_is_a_reason(value, monkeypatch):
    monkeypatch.setenv("KERNELINDEX_MAX_SNAPSHOT_BYTES", value)
    with pytest.raises(SourceError) as excinfo:
        DirectorySource(str(SNAPSHOTS))
    assert "KERNELINDEX_MAX_SNAPSHOT_BYTES" in one_line_error(excinfo)


@pytest.mark.parametrize("damage,reason", [
    (lambda data: data[: len(data) // 2], "is a truncated gzip file"),
    (lambda data: data[:-4] + b"\0\0\0\0", "is not a valid gzip file"),
    (lambda data: b"PK\x03\x04" + data, "is not a valid gzip file"),
], ids=["truncated", "bad length", "not gzip"])
def test_a_damaged_gzip_is_a_reason(damage, reason, tmp_path):
    (tmp_path / "x.csv.gz").write_bytes(damage(gzip.compress(b"kernel_name,x\n" + b"a,1\n" * 1000)))
    with pytest.raises(SourceError) as excinfo:
        read_one(one_entry(tmp_path, "x.csv.gz"))
    assert reason in one_line_error(excinfo) and "x.csv.gz" in str(excinfo.value)


# -- HTTP: the deadline ------------------------------------------------------------------------------------


def github(server: UpstreamServer, **options) -> GitHubSource:
    return GitHubSource(server.url, **{"backoff_s": 0.01, "timeout_s": 1.0, "max_retries": 3, **options})


@pytest.mark.parametrize("target,dribble_headers", [("raw", False), ("raw", True), ("api", False), ("api", True)],
                         ids=["file body", "file headers", "listing body", "listing headers"])
def test_a_dribbling_server_fails_at_the_deadline(target, dribble_headers, upstream_server, shipped):  # noqa: F811
    # a byte every 0.05 s never trips the 1 s read timeout; only the overall deadline ends it
    upstream_server.fault("dribble", target=target, times=None, delay_s=0.05, dribble_headers=dribble_headers)
    source = github(upstream_server, deadline_s=1.0)
    started = time.monotonic()
    with pytest.raises(SourceError) as excinfo:
        source.read(newest(shipped)) if target == "raw" else source.list_revisions()
    elapsed = time.monotonic() - started
    message = one_line_error(excinfo)
    assert "cut off while still receiving; the 1 s deadline ($KERNELINDEX_HTTP_DEADLINE_S) passed" in message
    assert 0.9 < elapsed < 2.0
    assert len(upstream_server.requests_to(target)) == 1


def test_the_deadline_counts_across_retries(upstream_server, shipped):  # noqa: F811
    upstream_server.fault("stall", target="raw", times=None, delay_s=2.0)
    source = github(upstream_server, timeout_s=0.3, max_retries=20, deadline_s=1.2)
    started = time.monotonic()
    with pytest.raises(SourceError) as excinfo:
        source.read(newest(shipped))
    elapsed = time.monotonic() - started
    assert "the 1.2 s deadline" in one_line_error(excinfo)
    assert elapsed < 2.0
    assert 2 <= len(upstream_server.requests_to("raw")) <= 4  # not the 21 attempts the retries allow


def test_the_deadline_covers_every_page_of_a_listing(upstream_server):  # noqa: F811
    upstream_server.fault("stall", target="api", times=None, delay_s=0.25)  # each page answers, slowly
    source = github(upstream_server, per_page=2, deadline_s=1.0)
    started = time.monotonic()
    with pytest.raises(SourceError) as excinfo:
        source.list_revisions()
    assert "deadline" in one_line_error(excinfo) and time.monotonic() - started < 2.0
    assert 2 <= len(upstream_server.requests_to("api")) <= 5


def test_a_wait_longer_than_the_deadline_is_not_waited(upstream_server, shipped):  # noqa: F811
    upstream_server.fault("status", target="raw", code=429, headers={"Retry-After": "30"})
    source = github(upstream_server, deadline_s=2.0, backoff_cap_s=60)
    started = time.monotonic()
    with pytest.raises(SourceError) as excinfo:
        source.read(newest(shipped))
    assert "(rate limited); a retry in 30 s would pass the 2 s deadline" in one_line_error(excinfo)
    assert time.monotonic() - started < 1.0


def test_the_deadline_defaults_to_four_timeouts_and_reads_the_environment(monkeypatch):
    monkeypatch.delenv("KERNELINDEX_HTTP_DEADLINE_S", raising=False)
    assert GitHubSource("github:a/b", timeout_s=2.5).deadline_s == 10.0
    monkeypatch.setenv("KERNELINDEX_HTTP_DEADLINE_S", "7.5")
    assert GitHubSource("github:a/b", timeout_s=2.5).deadline_s == 7.5
    assert GitHubSource("github:a/b", deadline_s=3).deadline_s == 3.0


# -- HTTP: pagination ---------------------------------------------------------------------------------------


def test_endless_pages_stop_at_the_page_cap(upstream_server):  # noqa: F811
    upstream_server.fault("endless_pages", target="api", times=None)
    with pytest.raises(SourceError) as excinfo:
        github(upstream_server, per_page=10, max_pages=7).list_revisions()
    assert "more than 7 pages" in one_line_error(excinfo) and "KERNELINDEX_HTTP_MAX_PAGES" in str(excinfo.value)
    assert [int(r.query["page"]) for r in upstream_server.requests_to("api")] == list(range(1, 8))


def test_the_page_cap_reads_the_environment(upstream_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("KERNELINDEX_HTTP_MAX_PAGES", "3")
    upstream_server.fault("endless_pages", target="api", times=None)
    with pytest.raises(SourceError, match="more than 3 pages"):
        github(upstream_server, per_page=50).list_revisions()
    assert len(upstream_server.requests_to("api")) == 3
    monkeypatch.delenv("KERNELINDEX_HTTP_MAX_PAGES")
    assert GitHubSource("github:a/b").max_pages == 100


def test_a_listing_within_the_page_cap_is_whole(upstream_server, shipped):  # noqa: F811
    revisions = github(upstream_server, per_page=4, max_pages=9).list_revisions()  # 34 commits: 9 pages
    assert [r.commit for r in revisions] == [r.commit for r in shipped.list_revisions()]


# -- HTTP: redirects ---------------------------------------------------------------------------------------


@pytest.fixture
def other_host():
    """A second server, named `localhost`: another host than 127.0.0.1 for the client."""
    with UpstreamServer(host="localhost") as server:
        yield server


@pytest.mark.parametrize("target", ["raw", "api"])
def test_a_redirect_to_another_host_is_refused(target, upstream_server, other_host, shipped, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    upstream_server.fault("redirect", target=target, times=None, location=other_host.url)
    source = github(upstream_server)
    with pytest.raises(SourceError) as excinfo:
        source.read(newest(shipped)) if target == "raw" else source.list_revisions()
    message = one_line_error(excinfo)
    assert f"refusing a redirect to another host ({other_host.url}/" in message and TOKEN not in message
    assert other_host.requests == []  # nothing sent there, so nothing from there
    assert len(upstream_server.requests_to(target)) == 1  # not retried


def test_a_redirect_on_the_same_host_is_followed_with_the_token(upstream_server, shipped, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    upstream_server.fault("redirect", target="raw", code=301, location=upstream_server.url)
    revision = newest(shipped)
    assert github(upstream_server).read(revision) == shipped.read(revision)
    raw = upstream_server.requests_to("raw")
    assert [r.fault for r in raw] == ["redirect", None]
    assert {r.headers.get("authorization") for r in raw} == {f"Bearer {TOKEN}"}


def test_endless_same_host_redirects_stop(upstream_server, shipped):  # noqa: F811
    upstream_server.fault("redirect", target="raw", times=None, location=upstream_server.url)
    with pytest.raises(SourceError) as excinfo:
        github(upstream_server).read(newest(shipped))
    assert "more than 5 redirects" in one_line_error(excinfo)
    assert len(upstream_server.requests_to("raw")) == 6


def test_the_other_host_serves_when_asked_directly(other_host, shipped):
    revision = newest(shipped)
    assert other_host.url.startswith("http://localhost:")
    with GitHubSource(other_host.url, backoff_s=0.01) as source:
        assert source.read(revision) == shipped.read(revision)


# -- HTTP: JSON ------------------------------------------------------------------------------------------


def test_a_deeply_nested_listing_is_a_reason(upstream_server):  # noqa: F811
    upstream_server.fault("deep_json", target="api", times=None, depth=100_000)
    with pytest.raises(SourceError) as excinfo:
        github(upstream_server, max_retries=1).list_revisions()
    message = one_line_error(excinfo)
    assert "the commit listing is JSON nested deeper than 64 levels" in message and "after 2 attempts" in message


def test_a_listing_nested_within_the_cap_parses(upstream_server):  # noqa: F811
    upstream_server.fault("deep_json", target="api", times=None, depth=64)
    with pytest.raises(SourceError) as excinfo:
        github(upstream_server, max_retries=0).list_revisions()
    assert "malformed commit object" in one_line_error(excinfo)  # parsed, then found not to be commits


def test_a_listing_page_over_its_cap_is_refused_before_parsing(upstream_server):  # noqa: F811
    wide = b"[" + b"[]," * (3 * MiB) + b"[]]"  # shallow but 9 MiB: a page of commits is far smaller
    upstream_server.fault("garbage", target="api", times=None, body=wide)
    started = time.monotonic()
    with pytest.raises(SourceError) as excinfo:
        github(upstream_server).list_revisions()
    assert "over the 8388608-byte cap" in one_line_error(excinfo) and time.monotonic() - started < 3
    assert len(upstream_server.requests_to("api")) == 1


def test_a_deeply_nested_commit_lookup_keeps_the_404(upstream_server, shipped):  # noqa: F811
    upstream_server.fault("status", target="raw", code=404)
    upstream_server.fault("deep_json", target="api", times=None)
    with pytest.raises(SourceError) as excinfo:
        github(upstream_server, max_retries=0).read(newest(shipped))
    assert "HTTP 404" in one_line_error(excinfo) and not isinstance(excinfo.value, FileDeletedAtRevision)


def test_a_deeply_nested_cache_entry_is_ignored(upstream_server, shipped, tmp_path):  # noqa: F811
    github(upstream_server, per_page=50, cache_dir=tmp_path).list_revisions()
    for entry in (tmp_path / "github-etags").glob("*.json"):
        entry.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    upstream_server.clear()
    revisions = github(upstream_server, per_page=50, cache_dir=tmp_path).list_revisions()
    assert [r.commit for r in revisions] == [r.commit for r in shipped.list_revisions()]
    assert all("if-none-match" not in r.headers for r in upstream_server.requests)


# -- settings that are not numbers ------------------------------------------------------------------------


@pytest.mark.parametrize("name,value", [
    ("KERNELINDEX_HTTP_TIMEOUT_S", "abc"),
    ("KERNELINDEX_HTTP_TIMEOUT_S", "nan"),
    ("KERNELINDEX_HTTP_RETRIES", "2.5"),
    ("KERNELINDEX_HTTP_BACKOFF_S", "-1"),
    ("KERNELINDEX_HTTP_MAX_BYTES", "1e999"),
])
def test_the_resource_refuses_a_knob_that_is_not_a_number(name, value, monkeypatch):
    from kernelindex_pipeline.defs.resources import UpstreamResource

    monkeypatch.setenv(name, value)
    resource = UpstreamResource(locations=["github:linkedin/Liger-Kernel"])  # built fine: read when used
    with pytest.raises(SourceError) as excinfo:
        resource.list_revisions()
    message = one_line_error(excinfo)
    assert message.startswith(f"${name} ") and repr(value) in message


@pytest.mark.parametrize("name,value", [
    ("KERNELINDEX_HTTP_DEADLINE_S", "abc"),
    ("KERNELINDEX_HTTP_DEADLINE_S", "0"),
    ("KERNELINDEX_HTTP_MAX_PAGES", "many"),
    ("KERNELINDEX_HTTP_MAX_PAGES", "0"),
])
def test_the_source_refuses_a_knob_that_is_not_a_number(name, value, monkeypatch):
    monkeypatch.setenv(name, value)
    with pytest.raises(SourceError) as excinfo:
        open_source("http://127.0.0.1:9", timeout_s=1)
    assert name in one_line_error(excinfo)


@pytest.mark.parametrize("option,value,reason", [
    ("timeout_s", 0, "HTTP timeout (seconds) must be more than 0"),
    ("timeout_s", float("nan"), "HTTP timeout (seconds) must be more than 0"),
    ("max_retries", -1, "HTTP retry count must be at least 0"),
    ("max_bytes", "lots", "HTTP body size cap is not a number"),
    ("deadline_s", -3, "HTTP deadline (seconds) must be more than 0"),
    ("max_pages", 0, "listing page cap must be more than 0"),
])
def test_the_source_refuses_an_unusable_setting(option, value, reason):
    with pytest.raises(SourceError) as excinfo:
        GitHubSource("github:a/b", **{option: value})
    assert reason in one_line_error(excinfo)
