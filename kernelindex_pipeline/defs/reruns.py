"""GPU reruns: KernelIndex-controlled evidence, measured on a CUDA device under the published protocol."""


import json
from datetime import datetime, timezone

import dagster as dg
from pydantic import Field

import kernels

from kernelindex_pipeline.core.catalog import GPUS
from kernelindex_pipeline.core.identity import slugify
from kernelindex_pipeline.defs.keys import OWNERS
from kernelindex_pipeline.defs.resources import WarehouseResource

RERUN_JOB = "gpu_reruns_job"
NO_CUDA = "no CUDA device here: GPU reruns need one; nothing was measured or published"
GPU_OP_TAGS = {"dagster-k8s/config": {"container_config": {"resources": {"limits": {"nvidia.com/gpu": 1}}}},
               "kernelindex/accelerator": "nvidia-gpu"}


class RerunConfig(dg.Config):
    device_minutes: float = Field(
        default=30.0, description="device time for the session: targets are measured in order while the next one "
        "is expected to fit; those not reached are left for the next materialization")
    only_unchecked: bool = Field(
        default=False, description="only workloads awaiting a rerun: a claim in claim_checks not re-checked for want of rerun evidence")


# The cards a rerun can run on (each catalog GPU), by the slug that names them: {slug: device name}.
CARDS = {slugify(g.source_name): g.source_name for g in GPUS.values()}
# One partition per kernel family (kernels/<family>/ with its ADAPTER) and card: a card's partitions are
# materialized on a machine with that card, one run per GPU (the `gpu` pool).
RERUN_PARTITIONS = dg.MultiPartitionsDefinition({
    "card": dg.StaticPartitionsDefinition(list(CARDS)),
    "kernel": dg.StaticPartitionsDefinition(list(kernels.FAMILIES)),
})


def rerun_partition(kernel: str, device_name: str) -> dg.MultiPartitionKey:
    """The partition of a kernel family's rerun on the card named ``device_name`` (torch.cuda.get_device_name)."""
    card = slugify(device_name)
    if card not in CARDS:
        raise ValueError(f"no rerun partition for the card {device_name!r}: the catalog knows {', '.join(CARDS.values())}")
    return dg.MultiPartitionKey({"card": card, "kernel": kernel})


# The rerun partitions the committed evidence holds: per kernel family and card, its sessions, controlled runs
# and evidence files.
EVIDENCE_PARTITIONS_SQL = """
SELECT kernel, gpu, count(DISTINCT session) AS sessions, count(*) AS runs,
    count(*) FILTER (WHERE status = 'passed') AS runs_passed,
    list(DISTINCT evidence_file ORDER BY evidence_file) AS files
FROM controlled_runs GROUP BY ALL ORDER BY ALL
"""


def evidence_materializations(con) -> list[dg.AssetMaterialization]:
    """A materialization of ``gpu_reruns`` for each partition the committed evidence holds (a kernel family on
    a card the catalog knows), with its sessions, runs and evidence files with their sha256 as metadata: what
    the UI shows of reruns measured elsewhere and committed."""
    digests = dict(con.execute("SELECT file, sha256 FROM evidence_files").fetchall())
    found = []
    for kernel, gpu, sessions, runs, passed, files in con.execute(EVIDENCE_PARTITIONS_SQL).fetchall():
        if kernel not in kernels.FAMILIES or slugify(gpu) not in CARDS:
            continue
        listing = "\n".join(["| evidence file | sha256 |", "|---|---|"]
                            + [f"| {f} | `{digests.get(f, 'unknown')}` |" for f in files])
        found.append(dg.AssetMaterialization(
            asset_key=gpu_reruns.key, partition=rerun_partition(kernel, gpu),
            description="committed rerun evidence", metadata={
                "sessions": sessions, "controlled_runs": runs, "controlled_runs_passed": passed,
                "evidence_files": dg.MetadataValue.md(listing)}))
    return found


# The rerun evidence of each kernel family and card. Its partitions are reported, never planned: by each
# publication that loads committed evidence, and by the GPU job when it has written a session; so a launch
# that cannot measure (no CUDA device, another card) fails in one line and leaves the partition as it was.
gpu_reruns = dg.AssetSpec(
    "gpu_reruns", group_name="gpu", kinds={"python", "triton"}, partitions_def=RERUN_PARTITIONS,
    owners=OWNERS, tags={"kernelindex/accelerator": "nvidia-gpu"},
    description="KernelIndex's rerun evidence of one kernel family on one card (partitions: card x kernel). "
    f"Needs a CUDA GPU of its partition's card: launch the `{RERUN_JOB}` job's partition on a GPU node (the "
    "`gpu` pool, one rerun per GPU), or commit evidence measured elsewhere; each publication that loads new "
    "evidence reports the partitions it holds, with their sessions, runs and files' sha256.")


@dg.op(pool="gpu", tags=GPU_OP_TAGS)
def measure_reruns(context: dg.OpExecutionContext, config: RerunConfig, warehouse: WarehouseResource) -> None:
    """Needs a CUDA GPU of its partition's card. Re-measures one covered kernel family on that card, for the
    workloads and providers its source comparison groups hold: correctness first on fresh random inputs, then
    timing under KernelIndex's protocol and the source's own (do_bench) harness; writes one evidence file
    (gzipped JSONL) into the evidence directory within ``device_minutes``, and reports it as the partition's
    materialization of ``gpu_reruns``; the next ingest publishes it."""
    from kernelindex_pipeline.gpu.device import cuda_available

    if not cuda_available():
        raise dg.Failure(description=NO_CUDA, allow_retries=False)
    from kernels.adapter import load_adapter

    from kernelindex_pipeline.gpu.rerun import run_reruns
    from kernelindex_pipeline.gpu.targets import warehouse_targets

    keys = context.partition_key.keys_by_dimension
    kernel, card = keys["kernel"], keys["card"]
    import torch

    here = torch.cuda.get_device_name(0)
    if slugify(here) != card:
        raise dg.Failure(description=f"partition card={card} needs an {CARDS[card]}; this machine's GPU is {here}",
                         allow_retries=False)
    load_adapter(kernel)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = warehouse.evidence_path() / f"rerun-{kernel}-{stamp}.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    with warehouse.warehouse().reader() as con:
        chosen = warehouse_targets(con, [kernel], config.only_unchecked)
    records = run_reruns(chosen, out, budget_s=config.device_minutes * 60)
    statuses = {s: sum(r["status"] == s for r in records) for s in ("passed", "failed", "unavailable", "too_large")}
    reached = len({json.dumps([r["params"], r["dtype"]], sort_keys=True) for r in records})
    context.log_event(dg.AssetMaterialization(
        asset_key=gpu_reruns.key, partition=context.partition_key, description="a rerun session of this job",
        metadata={"records": len(records), **{f"records_{s}": n for s, n in statuses.items()},
                  "targets": len(chosen), "targets_measured": reached,
                  "evidence_file": dg.MetadataValue.path(str(out))}))


@dg.job(name=RERUN_JOB, partitions_def=RERUN_PARTITIONS, tags={"kernelindex/accelerator": "nvidia-gpu"},
        description="Needs a CUDA GPU of the partition's card: measures one kernel family's reruns into the evidence "
        "directory (`gpu_reruns`); the next ingest publishes them.")
def rerun_job():
    measure_reruns()
