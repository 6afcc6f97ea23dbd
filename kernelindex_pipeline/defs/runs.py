"""Normalized observations, controlled evidence, the `runs` table and its manifests."""


import dagster as dg

from kernelindex_pipeline import steps
from kernelindex_pipeline.defs.metadata import markdown_table, published, table_metadata
from kernelindex_pipeline.defs.resources import WarehouseResource
from kernelindex_pipeline.defs.upstream import upstream_snapshots
from kernelindex_pipeline.partitions import upstream_revisions


@dg.asset(
    partitions_def=upstream_revisions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[upstream_snapshots],
    group_name="ingestion",
    kinds={"duckdb"},
    pool="warehouse",
)
def run_observations(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Every upstream row of a revision, normalized: an accepted observation of one run (canonical ids,
    units in ns/bytes, source metrics kept verbatim) or a quarantine row with its reason."""
    wh = warehouse.warehouse()
    result = steps.normalize_snapshots(wh, list(context.partition_keys))
    d = result.details
    with wh.reader() as con:
        metadata = table_metadata(con, "observations")
        metadata["quarantine_reasons"] = dg.MetadataValue.md(markdown_table(
            con, "SELECT reason, count(*) AS rows FROM snapshot_quarantine WHERE list_contains(?, revision_key) "
                 "GROUP BY reason ORDER BY rows DESC", params=[list(context.partition_keys)]))
    metadata.update({
        "dagster/row_count": result.rows, "rows_in": d["rows_in"], "quarantined": d["quarantined"],
        "quarantine_rate": round(d["quarantined"] / d["rows_in"], 6) if d["rows_in"] else 0.0,
    })
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(group_name="evidence", kinds={"duckdb", "json"}, pool="warehouse")
def controlled_evidence(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """KernelIndex-controlled reruns from the committed evidence files (data/evidence/*.jsonl.gz), each with
    its full protocol and environment; refused records go to quarantine."""
    wh = warehouse.warehouse()
    result = steps.load_controlled_evidence(wh, warehouse.evidence_path())
    with wh.reader() as con:
        metadata = table_metadata(con, "controlled_runs", "SELECT title, status, median_value, unit FROM controlled_runs")
    metadata["refused_records"] = result.details["refused"]
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(deps=[run_observations, controlled_evidence], group_name="warehouse", kinds={"duckdb", "parquet"},
          pool="warehouse")
def runs(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """One row per run ever seen (history is never deleted): identity, canonical values, first and last
    upstream revision listing it, `withdrawn_upstream` once a later snapshot drops it. Also rebuilds
    `quarantine` from every refused row."""
    wh = warehouse.warehouse()
    result = steps.rebuild_runs(wh)
    return published(wh, "runs", "SELECT title, gpu, workload_slug, median_value, unit FROM runs ORDER BY observed_at DESC",
                     changed=result.changed, quarantined=result.details["quarantined"])


@dg.asset(deps=[runs], group_name="warehouse", kinds={"duckdb", "json"}, pool="warehouse")
def run_manifests(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The canonical manifest of every run (BenchmarkRun, BenchmarkProtocol, ExecutionEnvironment;
    apiVersion kernelindex.dev/v1alpha1), with the sha256 digest of its BenchmarkRun."""
    wh = warehouse.warehouse()
    result = steps.rebuild_manifests(wh)
    return published(wh, "manifests", "SELECT r.title, r.workload_slug, m.run_id, m.run_digest FROM manifests m "
                                      "JOIN runs r USING (run_id) ORDER BY r.observed_at DESC", changed=result.changed)
