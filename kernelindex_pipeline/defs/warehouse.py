"""The warehouse tables, published together: one step builds the next generation, makes it live and checks it."""

import dagster as dg

from kernelindex_pipeline.defs import checks, verdict_reports
from kernelindex_pipeline.publish import steps
from kernelindex_pipeline.defs.metadata import markdown_table, table_metadata, views_metadata
from kernelindex_pipeline.defs.resources import WarehouseResource
from kernelindex_pipeline.defs.reruns import evidence_materializations
from kernelindex_pipeline.defs.keys import (
    ANALYST_VIEWS,
    ATTESTATIONS,
    CLAIM_CHECKS,
    COMPARISON_RANKS,
    CONTROLLED_EVIDENCE,
    LISTING_RANKS,
    NIGHTLY,
    QUARANTINE,
    RUN_MANIFESTS,
    RUN_OBSERVATIONS,
    RUNS,
    VERDICT_HISTORY,
    VERDICT_REPLICATION,
    VERSION_CHECKS,
)
from kernelindex_pipeline.defs.verdict_reports import (
    attestations_metadata,
    claim_checks_metadata,
    listing_ranks_metadata,
    verdict_replication_metadata,
    version_checks_metadata,
)
from kernelindex_pipeline.warehouse.sql import registered
from kernelindex_pipeline.warehouse.views import RANK_CHANGES_SQL


ORDER_CHANGES_SQL = """
SELECT kernel, operation_mode AS mode, metric, workload_slug AS workload, gpu, previous_order, current_order
FROM changes ORDER BY kernel, mode, metric, workload, gpu
"""
CHANGED_GROUPS = "comparison_key IN (SELECT key FROM publication_changes WHERE table_name = 'ranks')"
RANK_LEADERS_SQL = """
SELECT kernel, operation_mode AS mode, workload_slug AS workload, gpu, first_implementation AS leader,
    margin, confidence FROM rank_confidence ORDER BY group_size DESC, margin DESC
"""
CHECKS = [*checks.CHECKS, *verdict_reports.CHECKS]


def _specs() -> list[dg.AssetSpec]:
    """The tables ``warehouse_tables`` publishes (built here, not bound at module level, where the defs
    folder's loader would take each spec for an asset of its own)."""
    return [
        dg.AssetSpec(
            RUN_OBSERVATIONS, deps=["upstream_snapshots"], group_name="ingestion", **NIGHTLY, kinds={"duckdb"},
            description="Every upstream row of each landed revision, normalized: an accepted observation of one run "
            "(canonical ids, units in ns/bytes, source metrics kept verbatim) or a quarantine row with its reason; "
            "a file that is not a CSV at all is an unparseable revision."),
        dg.AssetSpec(
            CONTROLLED_EVIDENCE, deps=["gpu_reruns"], group_name="warehouse", **NIGHTLY, kinds={"duckdb", "json"},
            description="KernelIndex-controlled reruns from the committed evidence files (data/evidence/*.jsonl.gz), "
            "each with its full protocol and environment; refused records go to quarantine."),
        dg.AssetSpec(
            RUNS, deps=[RUN_OBSERVATIONS, CONTROLLED_EVIDENCE], group_name="warehouse", **NIGHTLY,
            kinds={"duckdb", "parquet"},
            description="One row per run ever seen (history is never deleted): identity, canonical values, first "
            "and last upstream revision listing it, `withdrawn_upstream` once a later snapshot drops it (every "
            "refused row: `quarantine`)."),
        dg.AssetSpec(
            RUN_MANIFESTS, deps=[RUNS], group_name="warehouse", **NIGHTLY, kinds={"duckdb", "json"},
            description="The canonical manifest of every run (BenchmarkRun, BenchmarkProtocol, ExecutionEnvironment), "
            "with the sha256 digest of its BenchmarkRun's RFC 8785 bytes. apiVersion kernelindex.dev/v1alpha1 where "
            "those are the bytes v1alpha1 digested (the digest is unchanged), else kernelindex.dev/v1alpha2, the "
            "earlier digest kept in `digest_aliases`."),
        dg.AssetSpec(
            COMPARISON_RANKS, deps=[RUNS], group_name="warehouse", **NIGHTLY, kinds={"duckdb", "parquet"},
            description="Current rank of each ranked run in its comparison group (same kernel, pass, metric, "
            "workload, environment and protocol family; newest listed run per implementation; 1 = lowest median), "
            "and `reproductions`, pairing controlled reruns with the source-native runs they re-check."),
        dg.AssetSpec(
            LISTING_RANKS, deps=[RUNS], group_name="warehouse", **NIGHTLY, kinds={"duckdb"},
            description="The rank each source-native run had in its comparison group when upstream first listed "
            "it, with the group's #1 then: stamped once, cited where a newer run has since taken its place."),
        dg.AssetSpec(
            CLAIM_CHECKS, deps=[COMPARISON_RANKS, CONTROLLED_EVIDENCE], group_name="warehouse", **NIGHTLY,
            kinds={"duckdb", "parquet"},
            description="Every source claim (a ranks ahead of b in a current source comparison group), re-checked "
            "by KernelIndex's reruns under the device-time and source-replica protocols: held, reversed, "
            "indistinguishable, or not re-checked with the reason (what each verdict was, and since when: "
            "`verdict_history`)."),
        dg.AssetSpec(
            VERSION_CHECKS, deps=[CLAIM_CHECKS], group_name="warehouse", **NIGHTLY, kinds={"duckdb", "parquet"},
            description="Every reversed claim (and the seed records' claims) re-checked by reruns of the "
            "Liger-Kernel release the source measured, beside its verdict at the reruns' current release: "
            "none, liger_changed, or not_run with the reason."),
        dg.AssetSpec(
            VERDICT_REPLICATION, deps=[CLAIM_CHECKS], group_name="warehouse", **NIGHTLY, kinds={"duckdb"},
            description="Per kernel and protocol, the claims measured in two or more independent rerun sessions "
            "and whether each session alone gave the same verdict (kept, moved, flipped held <-> reversed)."),
        dg.AssetSpec(
            QUARANTINE, deps=[RUN_OBSERVATIONS, CONTROLLED_EVIDENCE, ATTESTATIONS], group_name="warehouse", **NIGHTLY,
            kinds={"duckdb", "parquet"},
            description="Every upstream line, evidence record or attestation file not accepted, with its reason (the "
            "contract's table): never lost, never a crash."),
        dg.AssetSpec(
            VERDICT_HISTORY, deps=[CLAIM_CHECKS], group_name="warehouse", **NIGHTLY, kinds={"duckdb"},
            description="What each claim's verdict was under each protocol, and since when: a row per verdict a "
            "claim held, the open one current."),
        dg.AssetSpec(
            ANALYST_VIEWS, deps=[RUNS, COMPARISON_RANKS, CLAIM_CHECKS, VERSION_CHECKS], group_name="warehouse",
            **NIGHTLY, kinds={"duckdb"},
            description="The views analysts query (docs/warehouse.md): leaderboard, speedups, history, regressions, "
            "rank_confidence, workload_params and the rest, each with its columns."),
        dg.AssetSpec(
            ATTESTATIONS, deps=[RUNS], group_name="warehouse", **NIGHTLY, kinds={"duckdb", "json"},
            description="Readers' reproductions of runs and notes on them, validated from the attestation files "
            "(docs/attestations.md); a refused file is a `quarantine` row with its reason."),
    ]


@dg.multi_asset(specs=_specs(), check_specs=[c.spec for c in CHECKS], can_subset=False, pool="warehouse",
                name="warehouse_tables")
def warehouse_tables(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Publishes every landed revision and the committed evidence as the warehouse's next generation:
    all of these tables (and their Parquet copies) change together, or, on any failure, none does. Then
    checks the live generation (`checks.CHECKS`, `verdict_reports.CHECKS`)."""
    wh = warehouse.warehouse()
    done = steps.publish(wh, warehouse.evidence_path(), warehouse.attestations_path())
    if not done.published:
        context.log.info("nothing new landed and the evidence is unchanged: the live warehouse stays as it is")
    with wh.reader(bounded=True) as con:
        if done.evidence.changed:  # the rerun partitions the new evidence holds, as the UI shows them
            for materialization in evidence_materializations(con):
                context.log_event(materialization)
        yield _observations(con, done)
        yield dg.MaterializeResult(asset_key=CONTROLLED_EVIDENCE, metadata={
            **table_metadata(con, "controlled_runs", "SELECT title, status, median_value, unit FROM controlled_runs"),
            "refused_records": done.evidence.details.get("refused", 0),
            "files_read": done.evidence.details.get("read", 0)})
        yield dg.MaterializeResult(asset_key=RUNS, metadata={
            **table_metadata(con, "runs", "SELECT title, gpu, workload_slug, median_value, unit FROM runs "
                                          "ORDER BY observed_at DESC"),
            "changed": done.runs.changed, "quarantined": done.runs.details.get("quarantined", 0)})
        yield dg.MaterializeResult(asset_key=RUN_MANIFESTS, metadata={
            **table_metadata(con, "run_manifests", "SELECT r.title, r.workload_slug, m.run_id, m.run_digest FROM "
                                                   "(SELECT * FROM runs ORDER BY observed_at DESC LIMIT 10) r "
                                                   "JOIN run_manifests m USING (run_id) ORDER BY r.observed_at DESC"),
            "changed": done.manifests.changed})
        yield dg.MaterializeResult(asset_key=COMPARISON_RANKS, metadata=_ranks_metadata(con, done))
        yield dg.MaterializeResult(asset_key=LISTING_RANKS, metadata=listing_ranks_metadata(con, done.ranks.details))
        yield dg.MaterializeResult(asset_key=CLAIM_CHECKS, metadata=claim_checks_metadata(con, done.claims.details))
        yield dg.MaterializeResult(asset_key=VERSION_CHECKS, metadata=version_checks_metadata(con))
        yield dg.MaterializeResult(asset_key=VERDICT_REPLICATION, metadata=verdict_replication_metadata(con))
        yield dg.MaterializeResult(asset_key=ATTESTATIONS, metadata=attestations_metadata(
            con, done.runs.details.get("attestations", 0)))
        yield dg.MaterializeResult(asset_key=QUARANTINE, metadata=table_metadata(
            con, "quarantine", "SELECT reason, count(*) AS rows FROM quarantine GROUP BY reason ORDER BY rows DESC"))
        yield dg.MaterializeResult(asset_key=VERDICT_HISTORY, metadata=table_metadata(con, "verdict_history"))
        yield dg.MaterializeResult(asset_key=ANALYST_VIEWS, metadata=views_metadata(con))
        for check in CHECKS:
            yield check(con)


def _observations(con, done: steps.Publication) -> dg.MaterializeResult:
    d = done.observations.details
    metadata = table_metadata(con, "observations")
    metadata["quarantine_reasons"] = dg.MetadataValue.md(markdown_table(
        con, "SELECT reason, count(*) AS rows FROM snapshot_quarantine WHERE list_contains(?, revision_key) "
             "GROUP BY reason ORDER BY rows DESC", params=[d.get("keys", [])]))
    rows_in = d.get("rows_in", 0)
    metadata.update({
        "revisions": d.get("snapshots", 0), "unparseable_revisions": d.get("unparseable", 0), "rows_in": rows_in,
        "quarantined": d.get("quarantined", 0),
        "quarantine_rate": round(d.get("quarantined", 0) / rows_in, 6) if rows_in else 0.0,
    })
    return dg.MaterializeResult(asset_key=RUN_OBSERVATIONS, metadata=metadata)


def _ranks_metadata(con, done: steps.Publication) -> dict:
    """Rank counts, the groups whose order changed since the previous upstream revision (`rank_changes`),
    and the #1 of the largest groups with its margin over #2 (`rank_confidence`)."""
    metadata = table_metadata(con, "ranks")
    [(groups,)] = con.execute("SELECT count(DISTINCT comparison_key) FROM ranks").fetchall()
    # `rank_changes`, for the groups whose ranks this publication changed (no other group's order moved), once
    with registered(con, changes=con.sql(RANK_CHANGES_SQL.format(groups=CHANGED_GROUPS)).to_arrow_table()):
        [(order_changes, previous, latest)] = con.execute(
            "SELECT count(*), any_value(previous_revision), any_value(latest_revision) FROM changes").fetchall()
        heading = (f"**{order_changes} group(s) changed order** between `{previous}` and `{latest}`\n\n"
                   if order_changes else "No group changed order since the previous upstream revision.\n\n")
        (separated,) = con.execute("SELECT count(*) FILTER (WHERE separated) FROM rank_confidence").fetchone()
        (reproductions,) = con.execute("SELECT count(*) FROM reproductions").fetchone()
        metadata.update({
            "groups": int(groups), "order_changes": int(order_changes), "changed": done.ranks.changed,
            "preview": dg.MetadataValue.md(heading + markdown_table(con, ORDER_CHANGES_SQL, limit=25)),
            "leaders": dg.MetadataValue.md(markdown_table(con, RANK_LEADERS_SQL, limit=10)),
            "leaders_separated": int(separated), "reproductions": int(reproductions),
        })
    return metadata
