"""GeGLU MLP: down(gelu_tanh(gate(x)) * up(x)), as in Gemma."""

from kernels.shapes import gated_mlp
from kernels.spec import spec

SPEC = spec("geglu", "GeGLU MLP", implied=("hidden_act",), defaults={"batch": 1}, tensors=gated_mlp)
