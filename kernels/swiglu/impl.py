"""SwiGLU MLP (down(silu(gate(x)) * up(x))): the gated-MLP code of ``kernels.geglu.impl`` with SiLU."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels._impl_common import Built
from kernels.geglu.impl import (
    ACT_SILU,
    GRAD_INPUTS,
    OUTPUT_NAMES,
    build_mlp,
    make_mlp_inputs,
    mlp_bytes,
    mlp_flops,
    mlp_matmul_shapes,
)

KERNEL = "swiglu"
PROVIDERS = ("kernelindex", "liger", "huggingface")
REFERENCE_DTYPE = torch.float32
IMPLIED = {"hidden_act": "silu"}

__all__ = ["GRAD_INPUTS", "OUTPUT_NAMES", "PROVIDERS", "build", "bytes_moved", "flops", "make_inputs", "matmul_shapes",
           "reference"]


def make_inputs(params: dict, dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
    return make_mlp_inputs(KERNEL, params, dtype, seed, device)


def reference(inputs: dict, params: dict | None = None) -> tuple[torch.Tensor]:
    x, wg, wu, wd = inputs["x"], inputs["w_gate"], inputs["w_up"], inputs["w_down"]
    g = F.linear(x, wg)
    return (F.linear(g * torch.sigmoid(g) * F.linear(x, wu), wd),)


def build(provider: str, inputs: dict, params: dict | None = None) -> Built:
    return build_mlp(KERNEL, provider, inputs, "silu", ACT_SILU, "LigerSwiGLUMLP")


def bytes_moved(params, dtype, mode) -> int:
    return mlp_bytes(KERNEL, params, dtype, mode)


def flops(params, mode) -> int:
    return mlp_flops(KERNEL, params, mode)


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return mlp_matmul_shapes(KERNEL, params)
