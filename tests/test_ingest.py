"""Ingestion through Dagster: every source file, history, idempotence, the schedule and the sensor."""

import shutil

import dagster as dg
import pytest

from kernelindex_pipeline.defs import schedules
from kernelindex_pipeline.defs.resources import UpstreamResource
from kernelindex_pipeline.definitions import build_definitions, defs as location
from kernelindex_pipeline.defs.partitions import upstream_revisions
from kernelindex_pipeline.ingest.sources import DirectorySource
from kernelindex_pipeline.warehouse.store import CONTRACT_TABLES, Warehouse
from kernelindex_pipeline.warehouse.sql import table_checksum
from conftest import NO_EVIDENCE, copy_home, environment
from shipped_warehouse import SHIPPED_UPSTREAM, ingest_into

ALL_TABLES = CONTRACT_TABLES + ("snapshots", "observations", "run_keys", "workloads", "snapshot_quarantine",
                                "protocols", "environments", "reproductions", "controlled_runs")


def checksums(wh: Warehouse) -> dict[str, str]:
    with wh.reader() as con:
        return {t: table_checksum(con, t) for t in ALL_TABLES}


def parquet_bytes(wh: Warehouse) -> dict[str, bytes]:
    return {str(p.relative_to(wh.tables_dir)): p.read_bytes() for p in sorted(wh.tables_dir.rglob("*.parquet"))}


def test_every_upstream_file_and_revision_is_ingested(shipped_warehouse):
    revisions = DirectorySource(str(SHIPPED_UPSTREAM)).list_revisions()
    with shipped_warehouse.reader() as con:
        streams = dict(con.execute("SELECT stream, count(*) FROM snapshots GROUP BY 1").fetchall())
        observed = con.execute("SELECT count(*) FROM observations").fetchone()[0]
        quarantined = con.execute("SELECT count(*) FROM snapshot_quarantine").fetchone()[0]
        kernels = {k for (k,) in con.execute("SELECT DISTINCT kernel FROM runs").fetchall()}
    assert streams == {"all_benchmark_data": 34, "all_benchmark_data_cutedsl": 1, "all_benchmark_data_cutile": 3}
    assert len(revisions) == 38
    data_lines = sum(len(DirectorySource(str(SHIPPED_UPSTREAM)).read(r).decode().strip().splitlines()) - 1
                     for r in revisions)
    assert observed + quarantined == data_lines
    assert {"llama4_rope", "geglu", "fused_moe", "rms_norm"} <= kernels


def test_withdrawn_runs_are_kept_and_unranked(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        withdrawn, ranked_withdrawn = con.execute(
            "SELECT count(*), count(k.run_id) FROM runs r LEFT JOIN ranks k USING (run_id) WHERE r.withdrawn_upstream"
        ).fetchone()
        newest = con.execute("SELECT max(last_seen_revision) FROM runs WHERE withdrawn_upstream").fetchone()[0]
    assert withdrawn > 0 and ranked_withdrawn == 0
    assert newest is not None


def test_second_ingest_with_nothing_new_rewrites_no_row(analyst_home, tmp_path, capsys):
    home = copy_home(analyst_home, tmp_path / "home")
    wh = Warehouse(home)
    before, files = checksums(wh), parquet_bytes(wh)
    capsys.readouterr()
    assert ingest_into(home, "--source", str(SHIPPED_UPSTREAM)) == 0
    assert "nothing new" in capsys.readouterr().out
    assert checksums(wh) == before and parquet_bytes(wh) == files


def test_rematerializing_every_asset_changes_nothing(analyst_home, tmp_path):
    """Even a forced full re-run over all partitions (the nightly schedule's run) leaves every table as it was."""
    home = copy_home(analyst_home, tmp_path / "home")
    wh = Warehouse(home)
    before, files = checksums(wh), parquet_bytes(wh)
    instance = dg.DagsterInstance.ephemeral()
    keys = [r.key for r in DirectorySource(str(SHIPPED_UPSTREAM)).list_revisions()]
    instance.add_dynamic_partitions(upstream_revisions.name, keys)
    job = build_definitions(locations=[str(SHIPPED_UPSTREAM)], home=str(home)).resolve_job_def(schedules.INGEST_JOB)
    assert job.execute_in_process(instance=instance, tags=schedules.range_tags(keys)).success
    assert checksums(wh) == before and parquet_bytes(wh) == files


def test_new_revision_after_earlier_ones_keeps_history(tmp_path):
    """Ingest all but the newest main-file snapshot, then the newest: runs only grow, withdrawals appear."""
    partial = tmp_path / "partial"
    shutil.copytree(SHIPPED_UPSTREAM, partial)
    index = (partial / "INDEX.tsv").read_text().splitlines()
    newest = index[1]  # INDEX.tsv lists the newest main-file commit first
    (partial / "INDEX.tsv").write_text("\n".join([index[0]] + index[2:]) + "\n")
    home = tmp_path / "home"
    with environment(KERNELINDEX_EVIDENCE=str(NO_EVIDENCE)):  # what runs the newest revision withdraws
        assert ingest_into(home, "--source", str(partial)) == 0
    wh = Warehouse(home)
    stamps_sql = "SELECT run_id, published_at FROM publications"
    with wh.reader() as con:
        earlier = {r: w for r, w in con.execute("SELECT run_id, withdrawn_upstream FROM runs").fetchall()}
        first_stamps = dict(con.execute(stamps_sql).fetchall())
    (partial / "INDEX.tsv").write_text("\n".join(index) + "\n")
    with environment(KERNELINDEX_EVIDENCE=str(NO_EVIDENCE)):
        assert ingest_into(home, "--source", str(partial)) == 0
    with wh.reader() as con:
        later = {r: w for r, w in con.execute("SELECT run_id, withdrawn_upstream FROM runs").fetchall()}
        stamps = dict(con.execute(stamps_sql).fetchall())
    assert set(earlier) <= set(later)
    # "Published" is when the registry first published a run: kept as it was, and stamped for each new run.
    assert set(first_stamps) == set(earlier) and set(stamps) == set(later)
    assert all(stamps[r] == first_stamps[r] for r in earlier)
    assert all(stamps[r] >= max(first_stamps.values()) for r in set(later) - set(earlier))
    newly_withdrawn = [r for r in earlier if later[r] and not earlier[r]]
    assert newly_withdrawn, f"the newest snapshot ({newest.split()[0][:8]}) drops runs the previous one listed"


def test_definitions_load_with_jobs_schedule_sensor_and_checks():
    defs = location()
    repo = defs.get_repository_def()
    assert {j.name for j in repo.get_all_jobs()} >= {schedules.INGEST_JOB, "gpu_reruns_job"}
    assert repo.get_schedule_def("nightly_ingest").cron_schedule == "0 3 * * *"
    assert repo.get_sensor_def("new_upstream_revisions")
    check_names = {k.name for k in defs.resolve_asset_graph().asset_check_keys}
    assert {"unique_run_ids", "no_orphan_ranks", "every_run_has_manifest", "digests_recompute",
            "quarantine_rate_below_threshold", "no_unknown_kernels"} <= check_names


def test_sensor_adds_new_revisions_as_partitions_and_requests_one_run():
    instance = dg.DagsterInstance.ephemeral()
    upstream = UpstreamResource(locations=[str(SHIPPED_UPSTREAM)])
    context = dg.build_sensor_context(instance=instance, resources={"upstream": upstream})
    result = schedules.new_upstream_revisions(context)
    (request,) = result.dynamic_partitions_requests
    assert len(request.partition_keys) == 38
    (run,) = result.run_requests
    assert run.tags[schedules.RANGE_START] == request.partition_keys[0]
    instance.add_dynamic_partitions(upstream_revisions.name, list(request.partition_keys))
    again = schedules.new_upstream_revisions(dg.build_sensor_context(instance=instance, resources={"upstream": upstream}))
    assert not again.run_requests and not again.dynamic_partitions_requests


def test_asset_checks_pass_on_the_shipped_warehouse(shipped_warehouse):
    from kernelindex_pipeline.defs.warehouse import CHECKS

    with shipped_warehouse.reader() as con:
        for check in CHECKS:
            assert check(con).passed, check.name


def test_asset_checks_catch_a_publication_that_repeats_a_run_or_breaks_a_digest(shipped_warehouse, tmp_path):
    """The checks read what the latest publication wrote (`publication_changes`): planted there, a repeated
    run, a wrong stored digest, a run without its manifest and a manifest without its run fail them."""
    import duckdb

    from conftest import copy_home
    from kernelindex_pipeline.defs import checks

    home = copy_home(shipped_warehouse.home, tmp_path / "home")
    with duckdb.connect(str(Warehouse(home).db_path.resolve())) as con:
        repeated_id, altered_id, unmanifested_id, removed_id = [r for (r,) in con.execute(
            "SELECT run_id FROM runs ORDER BY observed_at, run_id LIMIT 4").fetchall()]
        con.execute("INSERT INTO runs SELECT * FROM runs WHERE run_id = ?", [repeated_id])
        con.execute("UPDATE run_manifests SET run_digest = 'sha256:' || repeat('0', 64) WHERE run_id = ?", [altered_id])
        con.execute("DELETE FROM run_manifests WHERE run_id = ?", [unmanifested_id])
        con.execute("DELETE FROM runs WHERE run_id = ?", [removed_id])
        con.execute("DELETE FROM publication_changes")
        con.execute("INSERT INTO publication_changes VALUES ('runs', ?), ('run_manifests', ?), ('run_manifests', ?), "
                    "('runs', ?)", [repeated_id, altered_id, unmanifested_id, removed_id])
    with Warehouse(home).reader() as con:
        repeated, wrong, unpaired = (checks.unique_run_ids(con), checks.digests_recompute(con),
                                     checks.every_run_has_manifest(con))
    assert not repeated.passed and repeated.metadata["duplicates"].value == 2  # its run id and its external id
    assert not wrong.passed and wrong.metadata["examples"].value == altered_id
    assert not unpaired.passed
    assert (unpaired.metadata["missing"].value, unpaired.metadata["without_run"].value) == (1, 1)
    from kernelindex_pipeline.publish.audit import faults  # the audit a staged generation passes first
    with duckdb.connect(str(Warehouse(home).db_path.resolve()), read_only=True) as con:
        found = faults(con)
    assert (found["duplicate run or external ids"], found["runs without a manifest"],
            found["manifests without a run"]) == (2, 1, 1)


@pytest.mark.parametrize("mode", ["missing-source"])
def test_unreadable_source_fails_with_one_line(tmp_path, capsys, mode):
    assert ingest_into(tmp_path / "home", "--source", str(tmp_path / "nowhere")) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("kernelindex: cannot list upstream revisions") and "\n" not in err


def test_committed_evidence_shows_as_the_rerun_assets_partitions(tmp_path, evidence_sample):
    """Reruns measured elsewhere and committed are what the Dagster UI shows of `gpu_reruns`: a materialized
    partition per kernel family and card the evidence holds, with its sessions, runs and files' sha256; a
    second ingest with the same evidence adds none."""
    from conftest import ingest, main_rows, query, write_snapshot_dir

    from kernelindex_pipeline.defs.reruns import rerun_partition

    home, source = tmp_path / "home", write_snapshot_dir(tmp_path / "source", main_rows()[:1])
    ingest(home, source, KERNELINDEX_EVIDENCE=str(evidence_sample))
    instance = dg.DagsterInstance.from_config(str(home / "dagster"))
    key = dg.AssetKey("gpu_reruns")
    held = query(home, "SELECT kernel, gpu, count(DISTINCT session), count(*) FROM controlled_runs GROUP BY ALL")
    assert len(held) > 5
    assert instance.get_materialized_partitions(key) == {rerun_partition(k, gpu) for k, gpu, *_ in held}
    events = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=1000).records
    assert len(events) == len(held)
    digests = dict(query(home, "SELECT file, sha256 FROM evidence_files"))
    for kernel, gpu, sessions, runs in held:
        [event] = [e.asset_materialization for e in events if e.asset_materialization.partition == rerun_partition(kernel, gpu)]
        assert (event.metadata["sessions"].value, event.metadata["controlled_runs"].value) == (sessions, runs)
        files = event.metadata["evidence_files"].value
        assert all(f"`{digests[f]}`" in files for f in digests if f in files)
    ingest(home, source, KERNELINDEX_EVIDENCE=str(evidence_sample))
    assert len(instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=1000).records) == len(held)


def test_the_catalogue_describes_columns_as_the_warehouse_docs_do(tmp_path):
    """The UI's column schema of `runs` and `ranks` carries each column's description from docs/warehouse.md;
    `quarantine` and `verdict_history` are assets, and every analyst view's columns are `analyst_views`'."""
    from conftest import REPO, ingest, main_rows, query, write_snapshot_dir

    from kernelindex_pipeline.defs.keys import COMPARISON_RANKS, RUNS

    home = tmp_path / "home"
    ingest(home, write_snapshot_dir(tmp_path / "source", main_rows()[:1]))
    instance = dg.DagsterInstance.from_config(str(home / "dagster"))
    docs = " ".join((REPO / "docs" / "warehouse.md").read_text(encoding="utf-8").replace("`", "").split())
    for key in (RUNS, COMPARISON_RANKS):
        event = instance.get_latest_materialization_event(key)
        columns = event.asset_materialization.metadata["dagster/column_schema"].value.columns
        described = {c.name: c.description for c in columns if c.description}
        assert len(described) >= len(columns) - 2, [c.name for c in columns if not c.description]
        assert all(text.rstrip(".")[:40] in docs for text in described.values())
    assert described["rank"].startswith("1 = lowest median")
    # every table analysts read is an asset, and every view part of one's column schemas
    for table in ("quarantine", "verdict_history"):
        event = instance.get_latest_materialization_event(dg.AssetKey(table))
        assert event.asset_materialization.metadata["dagster/row_count"].value == query(
            home, f"SELECT count(*) FROM {table}")[0][0]
    views = instance.get_latest_materialization_event(dg.AssetKey("analyst_views")).asset_materialization.metadata
    listed = query(home, "SELECT table_name, count(*) FROM information_schema.columns WHERE table_schema = 'main' "
                         "AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_type = 'VIEW') "
                         "GROUP BY 1")
    assert len(listed) > 10
    assert {name: len(views[f"columns/{name}"].value.columns) for name, _ in listed} == dict(listed)


def test_what_the_nightly_publishes_has_owners_and_a_freshness_policy():
    """Each table the nightly publishes names who answers for it and how stale it may get (a missed night)."""
    graph = location().get_repository_def().asset_graph
    published = [key for key in graph.get_all_asset_keys() if graph.get(key).group_name in ("warehouse", "ingestion")
                 and key != dg.AssetKey("upstream_snapshots")]
    assert len(published) >= 10
    for key in published:
        node = graph.get(key)
        assert node.owners == ["team:kernelindex"], key
        assert node.freshness_policy is not None and node.freshness_policy.fail_window.to_timedelta().total_seconds() == 26 * 3600, key
