"""Comparison groups and current ranks, and how controlled reruns reproduce source claims."""


import dagster as dg

from kernelindex_pipeline import steps
from kernelindex_pipeline.defs.metadata import markdown_table, table_metadata
from kernelindex_pipeline.defs.resources import WarehouseResource
from kernelindex_pipeline.defs.runs import runs

ORDER_CHANGES_SQL = """
SELECT kernel, operation_mode AS mode, metric, workload_slug AS workload, gpu, previous_order, current_order
FROM rank_changes ORDER BY kernel, mode, metric, workload, gpu
"""
LEADERS_SQL = """
SELECT kernel, operation_mode AS mode, workload_slug AS workload, gpu, first_implementation AS leader,
    margin, confidence FROM rank_confidence ORDER BY group_size DESC, margin DESC
"""


@dg.asset(deps=[runs], group_name="warehouse", kinds={"duckdb", "parquet"}, pool="warehouse")
def comparison_ranks(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Current rank of each ranked run in its comparison group (same kernel, pass, metric, workload,
    environment and protocol family; newest listed run per implementation; 1 = lowest median), and the
    `reproductions` table pairing controlled reruns with the source-native runs they re-check.

    Preview: the groups whose order changed since the previous upstream revision (`rank_changes` view);
    `leaders`: the #1 of the largest groups, with its margin over #2 and whether their p20-p80 intervals
    separate (`rank_confidence` view)."""
    wh = warehouse.warehouse()
    result = steps.rebuild_ranks(wh)
    with wh.reader() as con:
        metadata = table_metadata(con, "ranks")
        metadata["groups"] = result.details["groups"]
        (order_changes,) = con.execute("SELECT count(*) FROM rank_changes").fetchone()
        (previous, latest) = con.execute(
            "SELECT any_value(previous_revision), any_value(latest_revision) FROM rank_changes").fetchone() or (None, None)
        heading = (f"**{order_changes} group(s) changed order** between `{previous}` and `{latest}`\n\n"
                   if order_changes else "No group changed order since the previous upstream revision.\n\n")
        metadata["preview"] = dg.MetadataValue.md(heading + markdown_table(con, ORDER_CHANGES_SQL, limit=25))
        metadata["order_changes"] = int(order_changes)
        metadata["leaders"] = dg.MetadataValue.md(markdown_table(con, LEADERS_SQL, limit=10))
        (separated,) = con.execute("SELECT count(*) FILTER (WHERE separated) FROM rank_confidence").fetchone()
        metadata["leaders_separated"] = int(separated)
        (reproductions,) = con.execute("SELECT count(*) FROM reproductions").fetchone()
    metadata["reproductions"] = int(reproductions)
    metadata["changed"] = result.changed
    return dg.MaterializeResult(metadata=metadata)
