"""GeGLU's rerun adapter: down(gelu_tanh(gate(x)) * up(x)). KernelIndex's provider is
``kernels.engines.gated_mlp.gated_mlp`` with the GELU-tanh activation."""

from __future__ import annotations

from kernels.engines.gated_mlp import ACT_GELU_TANH
from kernels.engines.gated_mlp.rerun import GatedMLPAdapter

ADAPTER = GatedMLPAdapter("geglu", IMPLIED={"hidden_act": "gelu_pytorch_tanh"}, ACTIVATION=ACT_GELU_TANH,
                          LIGER=("geglu", "LigerGEGLUMLP"))
