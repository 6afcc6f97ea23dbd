"""Tiled SwiGLU's rerun adapter: down(silu(gate(x)) * up(x)) over ``num_shards`` sequence shards; the
providers and their reasons are ``kernels.engines.tiled_mlp``'s."""

from __future__ import annotations

from kernels.engines.gated_mlp import ACT_SILU
from kernels.engines.tiled_mlp import TiledMLPAdapter

ADAPTER = TiledMLPAdapter("tiled_swiglu", IMPLIED={"hidden_act": "silu", "activation_type": "swiglu"},
                          ACTIVATION=ACT_SILU, LIGER=("swiglu", "LigerSwiGLUMLP"), LIGER_TILED="LigerTiledSwiGLUMLP")
