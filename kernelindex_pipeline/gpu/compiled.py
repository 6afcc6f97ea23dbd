"""What a compiled provider really ran: dynamo's own counters since its compile, and whether any frame fell
back to eager PyTorch.

`kernels._providers.torch_compiled` resets dynamo before it compiles, so that every workload compiles
afresh: a script that compiles one module for many shapes in one process hits dynamo's recompile limit and
from then on runs eager without an error (only a logged warning). Whatever still falls back is caught here
and the provider recorded as `failed` (code `fell_back`), never timed as "torch.compile".
"""

from __future__ import annotations

from kernelindex_pipeline import catalog


def is_compiled(provider: str) -> bool:
    return provider in catalog.COMPILED_PROVIDERS


def compile_report() -> dict:
    """Dynamo's counters since the last reset: graphs compiled, frames seen and frames compiled, graph
    breaks, and the stack that compiled them."""
    import torch
    from torch._dynamo.utils import counters

    return {
        "backend": "inductor",
        "torch": torch.__version__,
        "graphs": int(counters["stats"].get("unique_graphs", 0)),
        "frames": int(counters["frames"].get("total", 0)),
        "frames_compiled": int(counters["frames"].get("ok", 0)),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }


def fell_back(report: dict) -> str | None:
    """Why a compiled provider's pass ran (partly) eager, or None when every frame dynamo saw compiled."""
    if report["graphs"] == 0:
        return "torch.compile fell back to eager: dynamo compiled no graph"
    if report["frames_compiled"] < report["frames"]:
        return (f"torch.compile fell back to eager: dynamo compiled {report['frames_compiled']} of "
                f"{report['frames']} frames (graphs {report['graphs']}); the others ran eager, as after its "
                "recompile limit")
    return None
