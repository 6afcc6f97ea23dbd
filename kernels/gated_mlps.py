"""Sharded (tiled) gated MLPs: GeGLU and SwiGLU computed over sequence shards to save memory."""

from kernels._spec import spec
from kernels.geglu import mlp_tensors

SPECS = [
    spec("tiled_geglu", "Tiled GeGLU MLP", implied=("hidden_act", "activation_type"), defaults={"batch": 1}, tensors=mlp_tensors),
    spec("tiled_swiglu", "Tiled SwiGLU MLP", implied=("hidden_act", "activation_type"), defaults={"batch": 1}, tensors=mlp_tensors),
    spec("relu_squared", "Squared ReLU", tensors=lambda p: {"x": [p["rows"], p["hidden"]]}, parameter_names={"N": "hidden"}),
]
