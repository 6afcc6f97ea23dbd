"""`kernelindex ingest` through a real HTTP server in GitHub's shapes (tests/upstream_server.py), with faults.

Every ingest here is the console script in a fresh process, so exit codes and stderr are what an operator
sees. Faults either end in success after retries (and the same tables a directory ingest gives) or in a
clear failure that leaves every table checksum, Parquet file and stored snapshot exactly as it was.
"""

from __future__ import annotations

import time

import pytest
from conftest import (
    BASE_REVISIONS,
    assert_clear_failure,
    contract_tables,
    copy_home,
    ingest,
    main_rows,
    published_state,
    query,
    run_cli,
    warehouse_state,
    write_snapshot_dir,
)
from upstream_server import UpstreamServer

from kernelindex_pipeline.ingest.sources import GitHubSource
from kernelindex_pipeline.warehouse.store import CONTRACT_TABLES, Warehouse

SNAPSHOT_COLUMNS = "revision_key, source, stream, source_file, commit, committed_at, sha256, bytes"


def test_full_http_backfill_equals_the_directory_source(tmp_path, full_directory_warehouse, evidence_sample):
    home = tmp_path / "home"
    with UpstreamServer() as server:
        url = server.url
        ingest(home, url, KERNELINDEX_EVIDENCE=str(evidence_sample))  # as the directory build read it
        listing = server.requests_to("api")
        fetched = len(server.requests_to("raw"))
        server.clear()
        GitHubSource(url).list_revisions()
        one_listing = server.requests_to("api")
    assert {r.query.get("path") for r in listing} == {
        "benchmark/data/all_benchmark_data.csv", "benchmark/data/all_benchmark_data_cutedsl.csv",
        "benchmark/data/all_benchmark_data_cutile.csv"}
    assert len(listing) == len(one_listing)  # the ingest listed upstream once
    assert fetched == len(query(full_directory_warehouse, "SELECT * FROM snapshots"))
    assert contract_tables(home) == contract_tables(full_directory_warehouse)
    for table in CONTRACT_TABLES:  # and the Parquet copies hold the same rows
        sql = "SELECT * FROM read_parquet(?) ORDER BY ALL"
        assert query(home, sql, [Warehouse(home).parquet(table)]) == \
            query(full_directory_warehouse, sql, [Warehouse(full_directory_warehouse).parquet(table)])
    snapshots = f"SELECT {SNAPSHOT_COLUMNS} FROM snapshots ORDER BY ALL"
    assert query(home, snapshots) == query(full_directory_warehouse, snapshots)
    assert {loc for (loc,) in query(home, "SELECT DISTINCT location FROM snapshots")} == {url}


# -- faults that a retry gets past -----------------------------------------------------------------------

NEW = 6  # revisions the faulty server offers beyond the base warehouse


@pytest.fixture(scope="module")
def offered(tmp_path_factory):
    """A source directory with the base revisions and NEW more, and a one-shot directory ingest of it."""
    root = write_snapshot_dir(tmp_path_factory.mktemp("offered"), main_rows()[:BASE_REVISIONS + NEW])
    return root


def test_transient_faults_end_in_success_with_the_same_tables(tmp_path, base_warehouse, offered):
    reference = tmp_path / "reference"
    ingest(reference, offered)
    home = copy_home(base_warehouse, tmp_path / "home")
    new = [r["commit"] for r in main_rows()[BASE_REVISIONS:BASE_REVISIONS + NEW]]
    with UpstreamServer(offered) as server:
        faults = [
            server.fault("status", target="api", code=502),
            server.fault("drop", target="api"),
            server.fault("status", target="raw", match=new[0], code=500, times=2),
            server.fault("status", target="raw", match=new[1], code=429, headers={"Retry-After": "1"}),
            server.fault("reset", target="raw", match=new[2]),
            server.fault("truncate", target="raw", match=new[3]),
            server.fault("html", target="raw", match=new[4]),
            server.fault("status", target="raw", match=new[5], code=403,
                         headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()))}),
            server.fault("garbage", target="raw", match=new[5]),
        ]
        result = ingest(home, server.url)
        raw = server.requests_to("raw")
    assert f"ingested {NEW} new of {BASE_REVISIONS + NEW}" in result.stdout
    assert [f.hits for f in faults] == [f.times for f in faults]
    for commit, attempts in zip(new, [3, 2, 2, 2, 2, 3]):
        assert sum(commit in r.path for r in raw) == attempts, commit
    limited = [i for i, r in enumerate(raw) if r.fault == "status" and new[1] in r.path][0]
    assert raw[limited + 1].at - raw[limited].at >= 0.95  # Retry-After: 1 was honoured
    assert contract_tables(home) == contract_tables(reference)


# -- faults that persist: a clear failure, nothing changed ---------------------------------------------

PERSISTENT = {
    "HTTP 500 on every attempt": (dict(kind="status", code=500), {}, "HTTP 500"),
    "connection reset on every attempt": (dict(kind="reset"), {}, "connection reset"),
    "HTML error page with 200 on every attempt": (dict(kind="html"), {}, "an HTML page, not a CSV"),
    "body over the size cap (streamed)": (
        dict(kind="oversize", size_bytes=2 * 2**20, declare_length=False, times=1),
        {"KERNELINDEX_HTTP_MAX_BYTES": str(2**20)}, "over the 1048576-byte cap"),
    "HTTP 404 at a commit that did not delete the file": (dict(kind="status", code=404, times=1), {}, "HTTP 404"),
}


@pytest.mark.parametrize("name", list(PERSISTENT))
def test_persistent_fault_is_a_clear_failure_that_changes_nothing(name, tmp_path, base_warehouse, offered):
    fault, env, reason = PERSISTENT[name]
    home = copy_home(base_warehouse, tmp_path / "home")
    published_before = published_state(home)
    last = main_rows()[BASE_REVISIONS + NEW - 1]["commit"]  # the others are fetched fine and kept, unpublished
    with UpstreamServer(offered) as server:
        server.fault(fault.pop("kind"), target="raw", match=last, **{"times": None, **fault})
        result = run_cli(home, "ingest", "--source", server.url, **env)
        fetched = {r.path.split("/")[3] for r in server.requests_to("raw")}
    line = assert_clear_failure(result)
    assert reason in line and last[:12] in line, line
    assert len(fetched) == NEW  # the failure came after the other new revisions were read
    assert published_state(home) == published_before


def test_a_listing_that_is_never_json_is_a_clear_failure(tmp_path, base_warehouse, offered):
    home = copy_home(base_warehouse, tmp_path / "home")
    before = warehouse_state(home)
    with UpstreamServer(offered) as server:
        server.fault("garbage", target="api", times=None)
        result = run_cli(home, "ingest", "--source", server.url)
    line = assert_clear_failure(result)
    assert "cannot list upstream revisions" in line and "not JSON" in line, line
    assert warehouse_state(home) == before


# -- a listed commit that deleted the file ---------------------------------------------------------------


def test_a_commit_that_deleted_the_file_is_a_revision_without_rows(tmp_path, base_warehouse, next_warehouse):
    """GitHub lists the commit that removed a file; its raw file is 404. The ingest records it as an empty
    snapshot (every run of the file withdrawn, none lost) instead of failing every night from then on."""
    rows = main_rows()[:BASE_REVISIONS + 1]
    root = write_snapshot_dir(tmp_path / "offered", rows)
    deletion = {"commit": "de1e7ed" + "0" * 33, "committed_at": "2024-12-01T00:00:00+00:00", "path": rows[0]["path"]}
    home = copy_home(base_warehouse, tmp_path / "home")
    with UpstreamServer(root, deleted=[deletion]) as server:
        result = ingest(home, server.url)
        assert "ingested 2 new" in result.stdout
        again = ingest(home, server.url)
        assert "nothing new" in again.stdout
    key = f"all_benchmark_data@{deletion['commit'][:12]}"
    assert query(home, "SELECT bytes FROM snapshots WHERE revision_key = ?", [key]) == [(0,)]
    assert query(home, "SELECT count(*) FROM observations WHERE revision_key = ?", [key]) == [(0,)]
    source_native = "SELECT run_id, last_seen_revision FROM runs WHERE evidence_level = 'source-native' ORDER BY ALL"
    assert query(home, source_native) == query(next_warehouse, source_native)  # every run kept
    assert query(home, "SELECT bool_and(withdrawn_upstream) FROM runs WHERE evidence_level = 'source-native'") \
        == [(True,)]
    assert query(home, "SELECT count(*) FROM ranks WHERE evidence_level = 'source-native'") == [(0,)]
    assert query(home, "SELECT count(*) FROM quarantine") == query(next_warehouse, "SELECT count(*) FROM quarantine")
