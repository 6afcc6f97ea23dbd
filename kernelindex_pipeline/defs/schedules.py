"""Jobs, the nightly schedule and the new-revision sensor."""


import dagster as dg

from kernelindex_pipeline.defs.resources import UpstreamResource
from kernelindex_pipeline.defs.partitions import upstream_revisions
from kernelindex_pipeline.ingest.sources import SourceError

INGEST_JOB = "ingest_upstream"
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"

ingest_job = dg.define_asset_job(
    INGEST_JOB,
    selection=dg.AssetSelection.groups("ingestion", "warehouse"),
    description="Every non-GPU asset: land new upstream snapshots, then publish the warehouse's next generation "
    "(observations, runs, manifests, ranks) in one step.",
)


def range_tags(keys: list[str]) -> dict[str, str]:
    """Tags that make one run cover a range of upstream revisions (single-run backfill)."""
    return {RANGE_START: keys[0], RANGE_END: keys[-1], "kernelindex/revisions": str(len(keys)),
            "kernelindex/upstream_revision": keys[-1]}


def unregistered(instance: dg.DagsterInstance, listed: list[str]) -> list[str]:
    """The revisions upstream lists that are not partitions yet, in upstream order."""
    known = set(instance.get_dynamic_partitions(upstream_revisions.name))
    return [k for k in listed if k not in known]


def register_revisions(instance: dg.DagsterInstance, listed: list[str]) -> list[str]:
    """Add what upstream newly lists as partitions (the schedule and the CLI; the sensor asks Dagster to add
    them through its result); returns every key in partition order."""
    new = unregistered(instance, listed)
    if new:
        instance.add_dynamic_partitions(upstream_revisions.name, new)
    return list(instance.get_dynamic_partitions(upstream_revisions.name))


def _listed_keys(upstream: UpstreamResource) -> list[str]:
    return [r.key for r in upstream.list_revisions()]


@dg.sensor(job=ingest_job, minimum_interval_seconds=3600, default_status=dg.DefaultSensorStatus.STOPPED,
           description="Hourly: adds upstream commits that changed a benchmark CSV as partitions and ingests them.")
def new_upstream_revisions(context: dg.SensorEvaluationContext, upstream: UpstreamResource) -> dg.SensorResult:
    """Every hour: adds upstream commits that changed a benchmark CSV as partitions and ingests them."""
    try:
        listed = _listed_keys(upstream)
    except SourceError as exc:
        return dg.SensorResult(skip_reason=f"upstream listing failed: {exc}")
    new = unregistered(context.instance, listed)
    if not new:
        return dg.SensorResult(skip_reason="no new upstream revision", cursor=listed[-1] if listed else None)
    return dg.SensorResult(
        dynamic_partitions_requests=[upstream_revisions.build_add_request(new)],
        run_requests=[dg.RunRequest(run_key=f"revisions:{new[0]}..{new[-1]}", tags=range_tags(new))],
        cursor=new[-1],
    )


@dg.schedule(job=ingest_job, cron_schedule="0 3 * * *", execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.RUNNING,
             description="03:00 UTC: registers new upstream revisions and ingests whatever is not published yet.")
def nightly_ingest(context: dg.ScheduleEvaluationContext, upstream: UpstreamResource):
    """03:00 UTC: registers new upstream revisions and ingests whatever is not published yet (revisions
    already landed or published are skipped without a fetch)."""
    try:
        keys = register_revisions(context.instance, _listed_keys(upstream))
    except SourceError as exc:
        return dg.SkipReason(f"upstream listing failed: {exc}")
    if not keys:
        return dg.SkipReason("upstream lists no revision")
    return dg.RunRequest(run_key=context.scheduled_execution_time.isoformat(), tags=range_tags(keys))
