"""GeGLU's rerun adapter (``kernels._adapter.RerunAdapter``): down(gelu_tanh(gate(x)) * up(x)).

KernelIndex's provider is ``kernels.engines.gated_mlp.gated_mlp`` with the GELU-tanh activation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels._adapter import Built
from kernels.engines.gated_mlp import ACT_GELU_TANH
from kernels.engines.gated_mlp import rerun as mlp

KERNEL = "geglu"
PROVIDERS = ("kernelindex", "liger", "huggingface")
OUTPUT_NAMES = mlp.OUTPUT_NAMES
GRAD_INPUTS = mlp.GRAD_INPUTS
IMPLIED = {"hidden_act": "gelu_pytorch_tanh"}
DETERMINISTIC_INPUTS = ()
# GEMMs at the rerun sizes in float64 take too long; the harness turns TF32 off for the reference.
REFERENCE_DTYPE = torch.float32
ACTIVATION = ACT_GELU_TANH


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    return mlp.make_mlp_inputs(KERNEL, params, dtype, seed, device)


def gelu_tanh_ref(a):
    return 0.5 * a * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a)))


def reference(inputs, params) -> tuple[torch.Tensor]:
    x, wg, wu, wd = inputs["x"], inputs["w_gate"], inputs["w_up"], inputs["w_down"]
    return (F.linear(gelu_tanh_ref(F.linear(x, wg)) * F.linear(x, wu), wd),)


def build(provider, inputs, params) -> Built:
    return mlp.build_mlp(KERNEL, provider, inputs, IMPLIED["hidden_act"], ACTIVATION, "LigerGEGLUMLP")


def bytes_moved(params, dtype, mode) -> int:
    return mlp.mlp_bytes(KERNEL, params, dtype, mode)


def flops(params, mode) -> int:
    return mlp.mlp_flops(KERNEL, params, mode)


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return mlp.mlp_matmul_shapes(KERNEL, params)
