"""Upstream snapshots: the bytes of each benchmark CSV at each upstream commit, content-addressed."""


import dagster as dg

from kernelindex_pipeline import steps
from kernelindex_pipeline.defs.metadata import table_metadata
from kernelindex_pipeline.defs.resources import UpstreamResource, WarehouseResource
from kernelindex_pipeline.partitions import upstream_revisions
from kernelindex_pipeline.sources import FileDeletedAtRevision, SourceError

SNAPSHOTS = dg.AssetKey("upstream_snapshots")


@dg.asset(
    partitions_def=upstream_revisions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="ingestion",
    kinds={"duckdb", "csv"},
    pool="upstream",
)
def upstream_snapshots(
    context: dg.AssetExecutionContext, upstream: UpstreamResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Each upstream revision's CSV bytes, stored under sha256 in KERNELINDEX_HOME/raw before anything
    parses them, and listed in the `snapshots` table (revision key, upstream path, commit, time, digest).
    A revision that deleted the file (see `FileDeletedAtRevision`) is stored as an empty snapshot: no rows,
    so that file's runs are `withdrawn_upstream` from then on, and the revision is not fetched again."""
    wh = warehouse.warehouse()
    keys = list(context.partition_keys)
    stored = set()
    if wh.exists():
        with wh.reader() as con:
            stored = {k for (k,) in con.execute("SELECT revision_key FROM snapshots").fetchall()}
    wanted = [k for k in keys if k not in stored]
    fetched = []
    if wanted:
        try:
            listed = {r.key: r for r in upstream.list_revisions(cache_dir=wh.home / "http-cache")}
            unknown = [k for k in wanted if k not in listed]
            if unknown:
                raise dg.Failure(f"upstream no longer lists revision(s) {', '.join(unknown)}")
            for key in wanted:
                try:
                    data = upstream.read(listed[key])
                except FileDeletedAtRevision as exc:
                    context.log.warning(f"{exc}: recorded as a revision with no rows")
                    data = b""
                fetched.append((listed[key], data))
        except SourceError as exc:
            raise dg.Failure(description=f"upstream fetch failed, warehouse unchanged: {exc}") from exc
    result = steps.record_snapshots(wh, fetched)
    context.log.info(f"{len(fetched)} snapshot(s) fetched, {len(keys) - len(wanted)} already stored")
    with wh.reader() as con:
        metadata = table_metadata(con, "snapshots", "SELECT revision_key, commit, committed_at, bytes FROM snapshots "
                                                    "ORDER BY committed_at DESC")
    metadata.update({"fetched": len(fetched), "already_stored": len(keys) - len(wanted), "bytes": result.details["bytes"],
                     "upstream_revision": keys[-1] if keys else ""})
    return dg.MaterializeResult(metadata=metadata)
