"""Tiled GeGLU MLP: GeGLU computed over sequence shards, the forward recomputed shard by shard in the backward
to save memory."""

from kernels.shapes import gated_mlp
from kernels.spec import spec

SPEC = spec("tiled_geglu", "Tiled GeGLU MLP", implied=("hidden_act", "activation_type"), defaults={"batch": 1},
            tensors=gated_mlp)
