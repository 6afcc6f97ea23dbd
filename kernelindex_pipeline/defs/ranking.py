"""Comparison groups and current ranks, and how controlled reruns reproduce source claims."""


import dagster as dg

from kernelindex_pipeline import steps
from kernelindex_pipeline.defs.metadata import markdown_table, table_metadata
from kernelindex_pipeline.defs.resources import WarehouseResource
from kernelindex_pipeline.defs.runs import runs

ORDER_CHANGES_SQL = """
SELECT r.title, r.gpu, r.workload_slug, k.rank, k.group_size FROM ranks k JOIN runs r USING (run_id)
WHERE k.comparison_key IN (SELECT comparison_key FROM ranks WHERE group_size > 1) AND k.rank = 1
ORDER BY r.observed_at DESC
"""


@dg.asset(deps=[runs], group_name="warehouse", kinds={"duckdb", "parquet"}, pool="warehouse")
def comparison_ranks(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Current rank of each ranked run in its comparison group (same kernel, pass, metric, workload,
    environment and protocol family; newest listed run per implementation; 1 = lowest median), and the
    `reproductions` table pairing controlled reruns with the source-native runs they re-check."""
    wh = warehouse.warehouse()
    result = steps.rebuild_ranks(wh)
    with wh.reader() as con:
        metadata = table_metadata(con, "ranks")
        metadata["groups"] = result.details["groups"]
        metadata["newest_leaders"] = dg.MetadataValue.md(markdown_table(con, ORDER_CHANGES_SQL))
        (reproductions,) = con.execute("SELECT count(*) FROM reproductions").fetchone()
    metadata["reproductions"] = int(reproductions)
    metadata["changed"] = result.changed
    return dg.MaterializeResult(metadata=metadata)
