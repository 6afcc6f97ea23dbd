"""SwiGLU MLP: down(silu(gate(x)) * up(x)), as in Llama."""

from kernels._spec import spec
from kernels.geglu import mlp_tensors

SPEC = spec("swiglu", "SwiGLU MLP", implied=("hidden_act",), defaults={"batch": 1}, tensors=mlp_tensors)
