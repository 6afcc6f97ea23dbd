"""Revision identities that cannot collide or lie: commits sharing a key prefix, one commit listed with two
files, a commit dated in the future. Each is refused with its reason, from a directory and over HTTP, and
through `kernelindex ingest` lands as a quarantine row that withdraws nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from conftest import BASE_REVISIONS, copy_home, ingest, main_rows, query, read_snapshot, write_snapshot_dir
from upstream_server import UpstreamServer

from kernelindex_pipeline.ingest.sources import DirectorySource, GitHubSource
from kernelindex_pipeline.warehouse.store import Warehouse
from kernelindex_pipeline.warehouse.sql import table_checksum

PREFIX = "ab12cd34ef56"
TWINS = (PREFIX + "0" * 28, PREFIX + "1" * 28)  # two commits whose first 12 hex digits are equal
FUTURE = "2099-01-01T00:00:00+00:00"


def _soon(hours: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(hours=hours)).replace(microsecond=0).isoformat()


def _source_dir(root, extra: list[dict], contents: dict[str, bytes] | None = None):
    """The base revisions plus `extra` rows of the main file (each {'commit', 'committed_at', 'file'})."""
    base = main_rows()[:BASE_REVISIONS]
    rows = base + [{**base[-1], **row} for row in extra]
    return write_snapshot_dir(root, rows, contents)


def _refused(source) -> dict[str, str]:
    return {r.commit: r.refused for r in source.list_revisions() if r.refused}


def test_commits_sharing_a_key_prefix_are_both_refused_under_their_full_ids(tmp_path):
    source = DirectorySource(str(_source_dir(tmp_path, [
        {"commit": TWINS[0], "committed_at": "2024-10-02T00:00:00+00:00"},
        {"commit": TWINS[1], "committed_at": "2024-10-03T00:00:00+00:00"}])))
    refused = _refused(source)
    assert set(refused) == set(TWINS)
    assert f"shares its revision key all_benchmark_data@{PREFIX}" in refused[TWINS[0]] and TWINS[1] in refused[TWINS[0]]
    keys = {r.key for r in source.list_revisions()}
    assert {f"all_benchmark_data@{c}" for c in TWINS} <= keys and f"all_benchmark_data@{PREFIX}" not in keys
    assert all(source.read(r) == b"" for r in source.list_revisions() if r.refused)
    assert len(keys) == BASE_REVISIONS + 2


@pytest.mark.parametrize("same_bytes", [True, False])
def test_one_commit_listed_with_two_files_is_refused_unless_their_bytes_agree(tmp_path, same_bytes):
    other = read_snapshot(main_rows()[0]) if same_bytes else read_snapshot(main_rows()[1])
    root = _source_dir(tmp_path, [{"commit": "d" * 40, "file": main_rows()[0]["file"]},
                                  {"commit": "d" * 40, "file": "copy.csv.gz"}], {"copy.csv.gz": other})
    source = DirectorySource(str(root))
    (listed,) = [r for r in source.list_revisions() if r.commit == "d" * 40]
    if same_bytes:
        assert listed.refused is None and source.read(listed) == read_snapshot(main_rows()[0])
    else:
        assert f"INDEX.tsv lines {BASE_REVISIONS + 2} and {BASE_REVISIONS + 3} list commit {'d' * 40}" in listed.refused
        assert "'copy.csv.gz'" in listed.refused and source.read(listed) == b""


@pytest.mark.parametrize("committed_at, refused", [(FUTURE, True), (_soon(30), True), (_soon(1), False)],
                         ids=["2099", "in-30-hours", "in-an-hour"])
def test_a_revision_dated_past_the_clock_is_refused(tmp_path, committed_at, refused):
    source = DirectorySource(str(_source_dir(tmp_path, [{"commit": "e" * 40, "committed_at": committed_at}])))
    (listed,) = [r for r in source.list_revisions() if r.commit == "e" * 40]
    assert bool(listed.refused) == refused
    if refused:
        assert f"committed_at {listed.committed_at} is more than 1 day(s) after this ingest's clock" in listed.refused


def test_the_live_source_refuses_the_same_revisions(tmp_path):
    root = _source_dir(tmp_path, [{"commit": TWINS[0], "committed_at": "2024-10-02T00:00:00+00:00"},
                                  {"commit": TWINS[1], "committed_at": "2024-10-03T00:00:00+00:00"},
                                  {"commit": "e" * 40, "committed_at": FUTURE}])
    with UpstreamServer(root) as server, GitHubSource(server.url, max_retries=0) as source:
        assert _refused(source).keys() == {*TWINS, "e" * 40}
        (future,) = [r for r in source.list_revisions() if r.commit == "e" * 40]
        assert source.read(future) == b""
        assert not [r for r in server.requests if "e" * 40 in r.path and r.target == "raw"]


def test_refused_revisions_are_quarantined_and_withdraw_nothing(tmp_path, base_warehouse, next_warehouse):
    """A 2099 revision that lists no run would, as the newest listing, withdraw every run of its file."""
    header_only = read_snapshot(main_rows()[0]).splitlines(keepends=True)[0]
    real_next = main_rows()[BASE_REVISIONS]
    source = _source_dir(tmp_path / "source", [
        real_next,
        {"commit": "e" * 40, "committed_at": FUTURE, "file": "future.csv.gz"},
        {"commit": TWINS[0], "committed_at": "2024-10-02T00:00:00+00:00", "file": "twin.csv.gz"},
        {"commit": TWINS[1], "committed_at": "2024-10-02T01:00:00+00:00", "file": "twin.csv.gz"},
        {"commit": "d" * 40, "committed_at": "2024-10-02T02:00:00+00:00", "file": "one.csv.gz"},
        {"commit": "d" * 40, "committed_at": "2024-10-02T02:00:00+00:00", "file": "two.csv.gz"},
    ], {"future.csv.gz": header_only, "twin.csv.gz": header_only, "one.csv.gz": header_only,
        "two.csv.gz": read_snapshot(main_rows()[1])})
    home = copy_home(base_warehouse, tmp_path / "home")

    result = ingest(home, source)
    assert "(4 refused, reasons in quarantine)" in result.stdout
    assert query(home, "SELECT DISTINCT sha256, bytes FROM snapshots WHERE state = 'refused'") == [(None, 0)]
    rows = query(home, "SELECT s.commit, s.state, s.committed_at, q.reason, q.line_number FROM snapshots s "
                       "JOIN quarantine q USING (revision_key) WHERE s.state = 'refused' ORDER BY 1")
    assert [r[0] for r in rows] == sorted([TWINS[0], TWINS[1], "d" * 40, "e" * 40])
    reasons = {commit: reason for commit, _, _, reason, _ in rows}
    assert "shares its revision key" in reasons[TWINS[0]] and "list commit " + "d" * 40 in reasons["d" * 40]
    assert "after this ingest's clock" in reasons["e" * 40] and FUTURE.replace("+00:00", "") in reasons["e" * 40]
    assert {(committed_at, line) for _, _, committed_at, _, line in rows} == {(None, 0)}
    with Warehouse(home).reader() as con, Warehouse(next_warehouse).reader() as reference:
        for table in ("runs", "ranks"):  # as if only the real next revision had been listed
            assert table_checksum(con, table) == table_checksum(reference, table), table
    assert "nothing new" in ingest(home, source).stdout


def test_two_locations_commits_sharing_a_key_are_both_refused_and_a_mirrored_commit_is_listed_once(tmp_path):
    from kernelindex_pipeline.defs.resources import UpstreamResource

    first = _source_dir(tmp_path / "first", [{"commit": TWINS[0], "committed_at": "2024-10-02T00:00:00+00:00"}])
    second = _source_dir(tmp_path / "second", [{"commit": TWINS[1], "committed_at": "2024-10-03T00:00:00+00:00"}])
    listed = UpstreamResource(locations=[str(first), str(second)]).list_revisions()
    refused = {r.commit: r.refused for r in listed if r.refused}
    assert set(refused) == set(TWINS) and TWINS[1] in refused[TWINS[0]] and TWINS[0] in refused[TWINS[1]]
    # The base revisions, offered by both locations, are listed once each and taken in.
    assert len(listed) == BASE_REVISIONS + 2 and len({r.key for r in listed}) == len(listed)
