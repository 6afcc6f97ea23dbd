"""Tiled GeGLU's rerun adapter (``kernels._adapter.RerunAdapter``): down(gelu_tanh(gate(x)) * up(x)) computed over
``num_shards`` sequence shards, the forward recomputed shard by shard in the backward to save memory.

The workloads, inputs and providers are tiled SwiGLU's (``kernels.tiled_swiglu.impl``, after Liger-Kernel's
``benchmark/scripts/benchmark_tiled_mlp.py``, which runs both) with the GELU-tanh activation
(``hidden_act="gelu_pytorch_tanh"``): ``liger_tiled`` is ``LigerTiledGEGLUMLP``, ``liger`` and
``liger_triton`` the untiled ``LigerGEGLUMLP``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels._adapter import Built
from kernels.engines.gated_mlp import ACT_GELU_TANH
from kernels.engines.gated_mlp import rerun as mlp
from kernels.tiled_mlp import workload_functions
from kernels.tiled_swiglu import impl as tiled

KERNEL = "tiled_geglu"
PROVIDERS = tiled.PROVIDERS
IMPLIED = {"hidden_act": "gelu_pytorch_tanh", "activation_type": "geglu"}
OUTPUT_NAMES = mlp.OUTPUT_NAMES
GRAD_INPUTS = mlp.GRAD_INPUTS
DETERMINISTIC_INPUTS = ()
# GEMMs at the rerun sizes in float64 take too long; the harness turns TF32 off for the reference.
REFERENCE_DTYPE = torch.float32


def reference(inputs, params) -> tuple[torch.Tensor]:
    x, wg, wu, wd = inputs["x"], inputs["w_gate"], inputs["w_up"], inputs["w_down"]
    g = F.linear(x, wg)
    gelu = 0.5 * g * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g * g * g)))
    return (F.linear(gelu * F.linear(x, wu), wd),)


def build(provider, inputs, params) -> Built:
    return tiled.build_tiled(
        KERNEL,
        provider,
        inputs,
        params,
        act=ACT_GELU_TANH,
        liger_module="geglu",
        liger_class="LigerGEGLUMLP",
        liger_tiled_class="LigerTiledGEGLUMLP",
    )


make_inputs, bytes_moved, flops, matmul_shapes = workload_functions(KERNEL)
