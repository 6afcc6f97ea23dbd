"""What a provider really ran, where it can silently run something else than its label says.

A compiled provider: dynamo's own counters since its compile, and whether any frame fell back to eager
PyTorch. `kernels.providers.torch_compiled` resets dynamo before it compiles, so that every workload
compiles afresh: a script that compiles one module for many shapes in one process hits dynamo's recompile
limit and from then on runs eager without an error (only a logged warning). A baseline package's compiled
path is one too (`catalog.COMPILED_PROVIDERS`): Megatron-Core's fused cross entropy compiles its steps with
`megatron.core.jit.jit_fuser`, which is torch.compile, or a no-op where Megatron finds no usable compiler
(TORCHINDUCTOR_DISABLE, an import that fails); its adapter resets dynamo too.

A Liger-Kernel backend (LIGER_KERNEL_IMPL): Liger swaps in the backend's autograd Functions for the ops the
backend has and keeps its Triton ones for the rest, without a word. The Functions that built a provider's
outputs (their autograd graph) say which ran.

A provider that fell back is recorded as `failed` (code `fell_back`), never timed under its label.
"""

from __future__ import annotations

LIGER_OPS = "liger_kernel.ops"


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


def autograd_functions(outputs) -> list[str]:
    """The modules and names of the custom autograd Functions in the graph that built `outputs`."""
    seen, found, stack = set(), [], [o.grad_fn for o in outputs if getattr(o, "grad_fn", None) is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        forward = getattr(node, "_forward_cls", None)
        if forward is not None:
            found.append(f"{forward.__module__}.{forward.__qualname__}")
        stack.extend(next_node for next_node, _ in getattr(node, "next_functions", ()))
    return sorted(set(found))


def backend_report(outputs, liger_impl: str) -> dict:
    """Which Liger-Kernel Functions built `outputs`, under the backend `liger_impl` asked for."""
    from liger_kernel.ops.backends import IMPL_REGISTRY

    info = IMPL_REGISTRY.get(liger_impl)
    return {"requested": liger_impl, "package": info.module_path.rsplit(".", 1)[0] if info else None,
            "functions": [f for f in autograd_functions(outputs) if f.startswith(LIGER_OPS)]}


def backend_fell_back(report: dict) -> str | None:
    """Why a provider asked to run on a Liger backend ran Liger's default kernels, or None."""
    functions, package = report["functions"], report["package"]
    if not functions:
        return None  # no Liger Function in the graph: nothing to tell which backend ran
    if package is None:
        return f"Liger-Kernel has no backend {report['requested']!r}; its default kernels ran"
    if not any(f.startswith(package + ".") for f in functions):
        return (f"Liger-Kernel's {report['requested']} backend has none of this op's Functions; its default "
                f"ran ({', '.join(functions)})")
    return None
