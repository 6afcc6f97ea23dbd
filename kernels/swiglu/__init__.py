"""SwiGLU MLP: down(silu(gate(x)) * up(x)), as in Llama."""

from kernels.shapes import gated_mlp
from kernels.spec import spec

SPEC = spec("swiglu", "SwiGLU MLP", implied=("hidden_act",), defaults={"batch": 1}, tensors=gated_mlp)
