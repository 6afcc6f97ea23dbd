"""SwiGLU's rerun adapter: down(silu(gate(x)) * up(x)). KernelIndex's provider is
``kernels.engines.gated_mlp.gated_mlp`` with the SiLU activation."""

from __future__ import annotations

from kernels.engines.gated_mlp import ACT_SILU
from kernels.engines.gated_mlp.rerun import GatedMLPAdapter

ADAPTER = GatedMLPAdapter("swiglu", IMPLIED={"hidden_act": "silu"}, ACTIVATION=ACT_SILU,
                          LIGER=("swiglu", "LigerSwiGLUMLP"))
