"""SwiGLU's rerun adapter (``kernels._adapter.RerunAdapter``): down(silu(gate(x)) * up(x)).

KernelIndex's provider is ``kernels.engines.gated_mlp.gated_mlp`` with the SiLU activation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels._adapter import Built
from kernels.engines.gated_mlp import ACT_SILU
from kernels.engines.gated_mlp import rerun as mlp

KERNEL = "swiglu"
PROVIDERS = ("kernelindex", "liger", "huggingface")
OUTPUT_NAMES = mlp.OUTPUT_NAMES
GRAD_INPUTS = mlp.GRAD_INPUTS
IMPLIED = {"hidden_act": "silu"}
DETERMINISTIC_INPUTS = ()
# GEMMs at the rerun sizes in float64 take too long; the harness turns TF32 off for the reference.
REFERENCE_DTYPE = torch.float32
ACTIVATION = ACT_SILU


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    return mlp.make_mlp_inputs(KERNEL, params, dtype, seed, device)


def reference(inputs, params) -> tuple[torch.Tensor]:
    x, wg, wu, wd = inputs["x"], inputs["w_gate"], inputs["w_up"], inputs["w_down"]
    g = F.linear(x, wg)
    return (F.linear(g * torch.sigmoid(g) * F.linear(x, wu), wd),)


def build(provider, inputs, params) -> Built:
    return mlp.build_mlp(KERNEL, provider, inputs, IMPLIED["hidden_act"], ACTIVATION, "LigerSwiGLUMLP")


def bytes_moved(params, dtype, mode) -> int:
    return mlp.mlp_bytes(KERNEL, params, dtype, mode)


def flops(params, mode) -> int:
    return mlp.mlp_flops(KERNEL, params, mode)


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return mlp.mlp_matmul_shapes(KERNEL, params)
