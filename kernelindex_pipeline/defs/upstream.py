"""Upstream snapshots: the bytes of each benchmark CSV at each upstream commit, landed for publication."""


import dagster as dg

from kernelindex_pipeline.publish import steps
from kernelindex_pipeline.defs.resources import UpstreamResource, WarehouseResource
from kernelindex_pipeline.defs.partitions import upstream_revisions
from kernelindex_pipeline.ingest.sources import FileDeletedAtRevision, SourceError


@dg.asset(
    partitions_def=upstream_revisions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="ingestion",
    kinds={"csv"},
    pool="upstream",
)
def upstream_snapshots(
    context: dg.AssetExecutionContext, upstream: UpstreamResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Each upstream revision's CSV bytes, stored under sha256 in KERNELINDEX_HOME/raw before anything
    parses them, and landed for the next publication of the warehouse (`warehouse_tables`).

    A revision that deleted the file (see `FileDeletedAtRevision`) lands with no rows, so that file's runs
    are `withdrawn_upstream` from then on; a registered revision that upstream no longer lists lands as
    `unlisted` (a quarantine record, nothing withdrawn). Neither is fetched again. With new revisions, each
    source's reference file (`SourceSpec.reference_file`) is fetched as the branch holds it now and landed
    too (published into `golden_commits`)."""
    wh = warehouse.warehouse()
    keys = list(context.partition_keys)
    known = steps.known_revisions(wh)
    wanted = steps.still_to_fetch(keys, known)
    fetched = deleted = unlisted = 0
    landed: set[str] = set()
    if wanted:
        try:
            listed = {r.key: r for r in upstream.list_revisions(cache_dir=wh.home / "http-cache")}
            for key in wanted:
                if key not in listed:
                    if key not in known:
                        steps.land_unlisted(wh, key)
                        landed.add(key)
                        context.log.warning(f"{key}: upstream no longer lists this revision; recorded as unlisted")
                        unlisted += 1
                    continue
                try:
                    steps.land_revision(wh, listed[key], upstream.read(listed[key]))
                    landed.add(key)
                    fetched += 1
                except FileDeletedAtRevision as exc:
                    context.log.warning(f"{exc}: recorded as a revision with no rows")
                    steps.land_revision(wh, listed[key], b"", state=steps.DELETED)
                    landed.add(key)
                    deleted += 1
            for source, path, data in upstream.read_references(cache_dir=wh.home / "http-cache"):
                wh.land_reference({"source": source, "path": path, "sha256": wh.store_raw(data), "bytes": len(data)})
        except SourceError as exc:
            raise dg.Failure(description=f"upstream fetch failed, warehouse unchanged: {exc}") from exc
    context.log.info(f"{fetched} snapshot(s) fetched, {len(keys) - len(wanted)} already stored")
    return dg.MaterializeResult(metadata={
        "dagster/row_count": len(known.keys() | landed), "fetched": fetched, "deleted_upstream": deleted,
        "unlisted_upstream": unlisted,
        "already_stored": len(keys) - len(wanted), "upstream_revision": keys[-1] if keys else ""})
