"""The KernelIndex Dagster code location."""

from __future__ import annotations

import dagster as dg

from kernelindex_pipeline.defs import checks, publish, reruns, schedules, upstream
from kernelindex_pipeline.defs.resources import UpstreamResource, WarehouseResource

ASSETS = [upstream.upstream_snapshots, publish.warehouse_tables, reruns.gpu_reruns]


def build_definitions(locations: list[str] | None = None, home: str = "", evidence_dir: str = "") -> dg.Definitions:
    """Definitions bound to given sources and warehouse (defaults: $KERNELINDEX_SOURCES, $KERNELINDEX_HOME)."""
    return dg.Definitions(
        assets=ASSETS,
        asset_checks=checks.CHECKS,
        jobs=[schedules.ingest_job, reruns.rerun_job],
        schedules=[schedules.nightly_ingest],
        sensors=[schedules.new_upstream_revisions],
        resources={
            "upstream": UpstreamResource(locations=locations or []),
            "warehouse": WarehouseResource(home=home, evidence_dir=evidence_dir),
        },
    )


defs = build_definitions()
