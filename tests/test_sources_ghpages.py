"""Sources as declarations: the shipped gh-pages runs, read from the directory and from a real HTTP server on
127.0.0.1 in GitHub's shapes (tree, sha-filtered commit listings, raw files), and their keys in a real Dagster
instance. No mocks."""

from __future__ import annotations

import csv
import gzip
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest
from upstream_server import GH_PAGES_SNAPSHOTS, SNAPSHOTS, GhPagesServer, gh_pages_server  # noqa: F401 (fixture)

from kernelindex_pipeline.ingest.sources import (
    LIGER_GH_PAGES,
    LIGER_MAIN,
    SOURCE_NAME,
    UPSTREAM_PATHS,
    DirectorySource,
    FileDeletedAtRevision,
    GitHubSource,
    Revision,
    SourceError,
    key_problem,
    open_source,
    source_spec,
    utc_iso,
)

REWRITTEN = "benchmarks/0701bab/benchmark.csv"


def index_rows(root: Path) -> list[dict]:
    with open(root / "INDEX.tsv", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def run_dir(path: str) -> str:
    return path.split("/")[1]


def fields(revision: Revision) -> tuple:
    return (revision.key, revision.committed_at, revision.stream, revision.commit, revision.path, revision.source,
            revision.benchmarked_commit, revision.release)


def read_or_removed(source, revision: Revision) -> bytes | str:
    try:
        return source.read(revision)
    except FileDeletedAtRevision:
        return "removed"


@pytest.fixture(scope="module")
def ghpages() -> DirectorySource:
    return DirectorySource(str(GH_PAGES_SNAPSHOTS))


@pytest.fixture(scope="module")
def upstream_header() -> bytes:
    """The header line of the main-branch CSV (its newest snapshot)."""
    main = DirectorySource(str(SNAPSHOTS))
    newest = [r for r in main.list_revisions() if r.path == UPSTREAM_PATHS[0]][-1]
    return main.read(newest).split(b"\n", 1)[0]


# -- the declarations ----------------------------------------------------------------------------------------


def test_two_declarations_of_one_kind():
    assert type(LIGER_MAIN) is type(LIGER_GH_PAGES)
    assert (LIGER_MAIN.name, LIGER_MAIN.branch, LIGER_MAIN.paths) == (SOURCE_NAME, "main", UPSTREAM_PATHS)
    assert (LIGER_GH_PAGES.name, LIGER_GH_PAGES.branch) == ("liger-kernel-gh-pages", "gh-pages")
    assert LIGER_MAIN.repository == LIGER_GH_PAGES.repository == "linkedin/Liger-Kernel"
    assert LIGER_GH_PAGES.benchmarked("benchmarks/0a62700-v0.6.4/benchmark.csv") == ("0a62700", "0.6.4")
    assert LIGER_GH_PAGES.benchmarked("benchmarks/0a62700/benchmark.csv") == ("0a62700", None)
    assert LIGER_GH_PAGES.stream_of("benchmarks/0a62700-v0.6.4/benchmark.csv") == "gh-pages/0a62700-v0.6.4"
    for path in ("benchmarks/a b/benchmark.csv", "benchmarks/x/y/benchmark.csv", "benchmarks/0a62700/other.csv",
                 "benchmarks/0a62700..v1/benchmark.csv", UPSTREAM_PATHS[0]):
        assert not LIGER_GH_PAGES.matches(path)
    assert source_spec("gh-pages") is source_spec("liger-kernel-gh-pages") is LIGER_GH_PAGES
    with pytest.raises(SourceError, match="no source declared"):
        source_spec("nightly")


# -- the shipped directories ----------------------------------------------------------------------------------


def test_the_shipped_gh_pages_directory(ghpages, upstream_header):
    rows = index_rows(GH_PAGES_SNAPSHOTS)
    revisions = ghpages.list_revisions()
    assert ghpages.spec is LIGER_GH_PAGES  # recognised by its paths
    assert len(revisions) == len(rows) == 46 and revisions == sorted(revisions)
    assert len({r.path for r in revisions}) == 38
    keys = [r.key for r in revisions]
    assert len(set(keys)) == len(keys)
    for r in revisions:
        assert key_problem(r.key) is None
        assert r.key == f"gh-pages/{run_dir(r.path)}@{r.commit[:12]}" and r.stream == f"gh-pages/{run_dir(r.path)}"
        assert r.source == "liger-kernel-gh-pages" and r.location == str(GH_PAGES_SNAPSHOTS)
        commit, _, release = run_dir(r.path).partition("-v")
        assert (r.benchmarked_commit, r.release) == (commit, release or None)
    assert {r.release for r in revisions} == {None, "0.6.3", "0.6.4", "0.6.5", "0.7.0"}

    # the path rewritten three times: four contents, distinct keys, one stream, all different bytes
    rewritten = [r for r in revisions if r.path == REWRITTEN]
    assert len(rewritten) == 4 and len({r.key for r in rewritten}) == 4 and len({r.stream for r in rewritten}) == 1
    assert len({ghpages.read(r) for r in rewritten}) == 4
    assert Counter(r.path for r in revisions).most_common(1)[0] == (REWRITTEN, 4)

    by_row = {(row["commit"], row["path"]): row["file"] for row in rows}
    removed, read = [], 0
    for r in revisions:
        stored = by_row[(r.commit, r.path)]
        assert r.committed_at == utc_iso(next(x["committed_at"] for x in rows if x["commit"] == r.commit))
        if not stored:
            with pytest.raises(FileDeletedAtRevision) as excinfo:
                ghpages.read(r)
            assert r.key in str(excinfo.value) and "\n" not in str(excinfo.value)
            removed.append(r)
            continue
        data = ghpages.read(r)
        assert data.split(b"\n", 1)[0].rstrip(b"\r") == upstream_header.rstrip(b"\r")
        assert data == gzip.decompress((GH_PAGES_SNAPSHOTS / stored).read_bytes())
        read += 1
    assert len(removed) == 5 and read == 41
    # a removal is each removed run's last revision
    for r in removed:
        assert r == [x for x in revisions if x.path == r.path][-1]


def test_the_main_directory_is_unchanged():
    """The main directory's revisions are what DirectorySource gave before declarations, computed here the old way
    from INDEX.tsv: (commit, path) first line wins, stream = file stem, key = stream@commit12."""
    old: dict[tuple[str, str], Revision] = {}
    for row in index_rows(SNAPSHOTS):
        if row["path"] in UPSTREAM_PATHS:
            stream = Path(row["path"]).name.removesuffix(".csv")
            old.setdefault((row["commit"], row["path"]),
                           Revision(utc_iso(row["committed_at"]), stream, row["commit"], row["path"], str(SNAPSHOTS)))
    source = DirectorySource(str(SNAPSHOTS))
    revisions = source.list_revisions()
    assert source.spec is LIGER_MAIN
    assert revisions == sorted(old.values())
    assert [r.key for r in revisions] == [f"{r.stream}@{r.commit[:12]}" for r in sorted(old.values())]
    assert all((r.source, r.benchmarked_commit, r.release) == (SOURCE_NAME, None, None) for r in revisions)
    assert all("/" not in r.key for r in revisions)


def test_a_directory_is_recognised_by_its_paths(tmp_path):
    rows = index_rows(GH_PAGES_SNAPSHOTS)
    main_row = index_rows(SNAPSHOTS)[0]
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    with open(mixed / "INDEX.tsv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows([rows[0], main_row])
    with pytest.raises(SourceError, match="several sources"):
        DirectorySource(str(mixed)).list_revisions()
    # named explicitly, a mixed directory reads as that declaration only
    (only,) = DirectorySource(str(mixed), spec=LIGER_GH_PAGES).list_revisions()
    assert only.path == rows[0]["path"]
    # an empty file is a removal only for a declaration with removals: the main one keeps refusing it
    main = tmp_path / "main"
    main.mkdir()
    with open(main / "INDEX.tsv", "w", encoding="utf-8", newline="") as handle:
        handle.write("commit\tcommitted_at\tpath\tfile\n" f"{'c' * 40}\t2026-01-01T00:00:00+00:00\t{UPSTREAM_PATHS[0]}\t\n")
    (revision,) = DirectorySource(str(main)).list_revisions()
    with pytest.raises(SourceError, match="is empty") as excinfo:
        DirectorySource(str(main)).read(revision)
    assert not isinstance(excinfo.value, FileDeletedAtRevision)
    # open_source recognises both shipped directories
    assert open_source(str(GH_PAGES_SNAPSHOTS)).spec is LIGER_GH_PAGES
    assert open_source(str(SNAPSHOTS)).spec is LIGER_MAIN


# -- live: the same revisions and bytes over HTTP ----------------------------------------------------------------


def test_the_live_gh_pages_source_matches_the_directory(gh_pages_server, ghpages):  # noqa: F811
    server = gh_pages_server
    location = f"{server.url}#gh-pages"
    expected = ghpages.list_revisions()
    present = set(server.head_paths())
    removed_runs = sorted({r.path for r in expected} - present)
    assert len(present) == 33 and len(removed_runs) == 5

    # the branch's tree alone: every run still on the branch, with its whole history
    with open_source(location, backoff_s=0.01, per_page=3) as live:
        assert live.spec is LIGER_GH_PAGES and live.repository == "linkedin/Liger-Kernel"
        assert [fields(r) for r in live.list_revisions()] == [fields(r) for r in expected if r.path in present]
    trees = [r for r in server.requests_to("api") if "/git/trees/" in r.path]
    assert len(trees) == 1 and trees[0].path.endswith("/git/trees/gh-pages") and trees[0].query["recursive"] == "1"
    listings = [r for r in server.requests_to("api") if r.path.endswith("/commits")]
    assert listings and all(r.query["sha"] == "gh-pages" for r in listings)
    assert any(int(r.query["page"]) > 1 for r in listings)  # 0701bab's 4 commits take two pages of 3

    # plus the runs upstream removed (the ingestion names the paths it has seen): exactly the directory
    with open_source(location, backoff_s=0.01, paths=tuple(removed_runs)) as live:
        revisions = live.list_revisions()
        assert [fields(r) for r in revisions] == [fields(r) for r in expected]
        assert all(r.location == location for r in revisions)
        for revision, stored in zip(revisions, expected):
            assert read_or_removed(live, revision) == read_or_removed(ghpages, stored)
    # the dashboard's golden commits, as the branch holds them now, byte for byte as the directory keeps them
    with open_source(location, backoff_s=0.01) as live:
        assert live.read_reference() == ghpages.read_reference() == (GH_PAGES_SNAPSHOTS / "golden_commits.json").read_bytes()
    assert any(r.path.endswith("/gh-pages/benchmarks/golden_commits.json") for r in server.requests_to("raw"))
    # a listed revision reads again from its location alone (as the ingestion does)
    again = open_source(revisions[-1].location, backoff_s=0.01)
    assert again.spec is LIGER_GH_PAGES and again.read(revisions[-1]) == ghpages.read(expected[-1])


def test_live_gh_pages_goes_through_the_hardened_client(gh_pages_server, ghpages):  # noqa: F811
    server = gh_pages_server
    on_branch = [r.key for r in ghpages.list_revisions() if r.path in set(server.head_paths())]
    location = f"{server.url}#gh-pages"
    server.fault("status", code=502, target="api", match="/git/trees/")
    server.fault("html", target="api", match="sha=gh-pages")
    with GitHubSource(location, backoff_s=0.01) as live:
        assert [r.key for r in live.list_revisions()] == on_branch  # after a 502 and an HTML page, retried
        assert [r.fault for r in server.requests_to("api")][:3] == ["status", None, "html"]
    server.clear()
    server.fault("deep_json", target="api", match="/git/trees/", times=None)
    with GitHubSource(location, backoff_s=0.01, max_retries=1) as live, pytest.raises(SourceError) as excinfo:
        live.list_revisions()
    assert "nested deeper" in str(excinfo.value) and "\n" not in str(excinfo.value)
    with GhPagesServer(truncated_tree=True) as truncated, GitHubSource(f"{truncated.url}#gh-pages") as live:
        with pytest.raises(SourceError, match="truncated"):
            live.list_revisions()
    # the main declaration on the same server lists nothing: its paths are not on gh-pages' default branch
    with GitHubSource(server.url, backoff_s=0.01) as main:
        assert main.spec is LIGER_MAIN and main.list_revisions() == []


def test_locations_name_the_declaration():
    assert GitHubSource("github:linkedin/Liger-Kernel@gh-pages").spec is LIGER_GH_PAGES
    assert GitHubSource("github:linkedin/Liger-Kernel").spec is LIGER_MAIN
    fork = GitHubSource("github:someone/Fork@liger-kernel-gh-pages")
    assert (fork.spec, fork.repository, fork.api_url) == (LIGER_GH_PAGES, "someone/Fork", "https://api.github.com")
    url = GitHubSource("http://127.0.0.1:9/base/#gh-pages")
    assert url.spec is LIGER_GH_PAGES and url.api_url == url.raw_url == "http://127.0.0.1:9/base"
    for bad in ("github:linkedin/Liger-Kernel@nightly", "http://127.0.0.1:9#no such"):
        with pytest.raises(SourceError) as excinfo:
            open_source(bad)
        assert "\n" not in str(excinfo.value)


# -- the keys in Dagster ----------------------------------------------------------------------------------------


def test_partition_keys_are_accepted_by_dagster(ghpages):
    keys = [r.key for r in ghpages.list_revisions()] + [r.key for r in DirectorySource(str(SNAPSHOTS)).list_revisions()]
    partitions = dg.DynamicPartitionsDefinition(name="upstream_revisions")
    request = partitions.build_add_request(keys)
    assert list(request.partition_keys) == keys

    run_key = next(k for k in keys if k.startswith("gh-pages/0a62700-v0.6.4@"))

    @dg.asset(partitions_def=partitions)
    def snapshot(context):
        return dg.MaterializeResult(metadata={"key": context.partition_key})

    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(partitions.name, keys)
        assert list(instance.get_dynamic_partitions(partitions.name)) == keys
        assert all(instance.has_dynamic_partition(partitions.name, k) for k in keys)
        result = dg.materialize([snapshot], instance=instance, partition_key=run_key)
        assert result.success
        (event,) = result.asset_materializations_for_node("snapshot")
        assert event.partition == run_key and event.metadata["key"].value == run_key
    # the rules Dagster enforces where it checks keys (static partitions), and the separators of its selections
    assert dg.StaticPartitionsDefinition(keys).get_partition_keys() == keys
    assert not any(mark in k for k in keys for mark in (",", "|", "[", "]", "...", " "))
