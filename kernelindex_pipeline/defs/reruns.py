"""GPU reruns: KernelIndex-controlled evidence, measured on a CUDA device under the published protocol."""


import json
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
from pydantic import Field

import kernels

from kernelindex_pipeline.defs.publish import warehouse_tables
from kernelindex_pipeline.defs.resources import WarehouseResource

RERUN_JOB = "gpu_reruns_job"
NO_CUDA = "no CUDA device here: GPU reruns need one; nothing was measured or published"
GPU_OP_TAGS = {"dagster-k8s/config": {"container_config": {"resources": {"limits": {"nvidia.com/gpu": 1}}}},
               "kernelindex/accelerator": "nvidia-gpu"}


class RerunConfig(dg.Config):
    targets: str = Field(
        default="seeds",
        description="seeds (the two seed workloads), all (every covered workload), or leaders (the workloads of "
        "each covered group's current #1 and Liger runs, from the warehouse)",
    )
    kernels: list[str] = Field(default_factory=list, description="only these kernels (empty: all of the target set)")
    max_targets: int = Field(default=24, description="cap on leader workloads per session")


def covered_kernels() -> list[str]:
    """Kernels with rerun implementations (kernels/<name>/impl.py)."""
    root = Path(kernels.__file__).parent
    return sorted(p.parent.name for p in root.glob("*/impl.py"))


LEADERS_SQL = """
SELECT r.kernel, w.definition, list(DISTINCT r.operation_mode ORDER BY r.operation_mode) AS modes
FROM ranks k JOIN runs r USING (run_id) JOIN workloads w USING (workload_digest)
WHERE r.evidence_level = 'source-native' AND r.metric = 'latency' AND list_contains(?, r.kernel)
  AND r.operation_mode IN ('forward', 'backward', 'full') AND (k.rank = 1 OR r.provider = 'liger')
GROUP BY ALL ORDER BY r.kernel, w.definition LIMIT ?
"""


def leader_targets(con, only: list[str], limit: int) -> list[dict]:
    """Rerun targets for the workloads of each covered group's current #1 and Liger runs."""
    targets = []
    for kernel, definition, modes in con.execute(LEADERS_SQL, [only, limit]).fetchall():
        spec = json.loads(definition)["spec"]
        targets.append({"kernel": kernel, "params": spec["parameters"], "dtype": spec["dtype"],
                        "implied": spec["implied"], "providers": ["liger", "huggingface", "kernelindex"],
                        "modes": list(modes), "metrics": ["latency", "peak_memory"]})
    return targets


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
    if config.targets == "leaders":
        with warehouse.warehouse().reader() as con:
            chosen = leader_targets(con, config.kernels or covered_kernels(), config.max_targets)
    else:
        chosen = targets_named(config.targets, config.kernels or None)
    records = run_reruns(chosen, out)
    failed = sum(r["status"] == "failed" for r in records)
    return dg.MaterializeResult(metadata={"records": len(records), "failed_correctness": failed,
                                          "evidence_file": dg.MetadataValue.path(str(out))})


rerun_job = dg.define_asset_job(
    RERUN_JOB,
    selection=dg.AssetSelection.assets(gpu_reruns, warehouse_tables),
    description="GPU reruns, then the warehouse assets that publish them. Needs a CUDA device.",
    tags={"kernelindex/accelerator": "nvidia-gpu"},
)
