"""Tiled GeGLU's rerun adapter: down(gelu_tanh(gate(x)) * up(x)) over ``num_shards`` sequence shards; the
providers and their reasons are ``kernels.engines.tiled_mlp``'s (Liger-Kernel's
``benchmark/scripts/benchmark_tiled_mlp.py`` runs both activations)."""

from __future__ import annotations

from kernels.engines.gated_mlp import ACT_GELU_TANH
from kernels.engines.tiled_mlp import TiledMLPAdapter

ADAPTER = TiledMLPAdapter("tiled_geglu", IMPLIED={"hidden_act": "gelu_pytorch_tanh", "activation_type": "geglu"},
                          ACTIVATION=ACT_GELU_TANH, LIGER=("geglu", "LigerGEGLUMLP"), LIGER_TILED="LigerTiledGEGLUMLP")
