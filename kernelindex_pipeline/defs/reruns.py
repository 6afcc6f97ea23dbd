"""GPU reruns: KernelIndex-controlled evidence, measured on a CUDA device under the published protocol."""


from datetime import datetime, timezone

import dagster as dg
from pydantic import Field

from kernelindex_pipeline.defs.ranking import comparison_ranks
from kernelindex_pipeline.defs.resources import WarehouseResource
from kernelindex_pipeline.defs.runs import controlled_evidence, run_manifests, runs

RERUN_JOB = "gpu_reruns_job"
NO_CUDA = "no CUDA device here: GPU reruns need one; nothing was measured or published"
GPU_OP_TAGS = {"dagster-k8s/config": {"container_config": {"resources": {"limits": {"nvidia.com/gpu": 1}}}},
               "kernelindex/accelerator": "nvidia-gpu"}


class RerunConfig(dg.Config):
    targets: str = Field(default="seeds", description="seeds (the two seed workloads) or all (every covered workload)")
    kernels: list[str] = Field(default_factory=list, description="only these kernels (empty: all of the target set)")


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@dg.asset(group_name="evidence", kinds={"python", "triton"}, pool="gpu", op_tags=GPU_OP_TAGS)
def gpu_reruns(context: dg.AssetExecutionContext, config: RerunConfig, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Re-measures covered kernels (liger, huggingface and KernelIndex's own Triton kernels) on this
    machine's GPU: correctness first on fresh random inputs, then CUDA-event timing; writes one evidence
    file (gzipped JSONL) into the evidence directory."""
    if not cuda_available():
        raise dg.Failure(description=NO_CUDA)
    from kernelindex_pipeline.gpu import run_reruns
    from kernelindex_pipeline.gpu.targets import targets_named

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = warehouse.evidence_path() / f"rerun-{stamp}.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    records = run_reruns(targets_named(config.targets, config.kernels or None), out)
    failed = sum(r["status"] == "failed" for r in records)
    return dg.MaterializeResult(metadata={"records": len(records), "failed_correctness": failed,
                                          "evidence_file": dg.MetadataValue.path(str(out))})


rerun_job = dg.define_asset_job(
    RERUN_JOB,
    selection=dg.AssetSelection.assets(gpu_reruns, controlled_evidence, runs, run_manifests, comparison_ranks),
    description="GPU reruns, then the warehouse assets that publish them. Needs a CUDA device.",
    tags={"kernelindex/accelerator": "nvidia-gpu"},
)
