"""What the tiled gated-MLP adapters (``tiled_swiglu``, ``tiled_geglu``) share: their workload functions,
the gated MLP engine's inputs, bytes, FLOPs and GEMM shapes for the adapter's kernel. Their ``build``
(``build_tiled``) lives with tiled SwiGLU's adapter."""

from __future__ import annotations

import torch

from kernels.engines.gated_mlp import rerun as mlp


def workload_functions(kernel: str):
    """``make_inputs``, ``bytes_moved``, ``flops`` and ``matmul_shapes`` of the tiled MLP adapter ``kernel``."""

    def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
        return mlp.make_mlp_inputs(kernel, params, dtype, seed, device)

    def bytes_moved(params, dtype, mode) -> int:
        return mlp.mlp_bytes(kernel, params, dtype, mode)

    def flops(params, mode) -> int:
        """The MLP's GEMM FLOPs (``gated_mlp_engine.rerun.mlp_flops``), the same for every provider: the tiled
        providers' recomputed forward is their cost, not the workload's."""
        return mlp.mlp_flops(kernel, params, mode)

    def matmul_shapes(params) -> list[tuple[int, int, int]]:
        return mlp.mlp_matmul_shapes(kernel, params)

    return make_inputs, bytes_moved, flops, matmul_shapes
