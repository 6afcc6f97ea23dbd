"""The gated MLP behind GeGLU and SwiGLU: PyTorch GEMMs around KernelIndex's Triton activation kernels.

- ``settings``: the activation kernels' tiles and how the GEMMs are assembled, with their measurements.
- ``activation``: the gated-activation Triton kernels (GELU-tanh or SiLU) and their launches.
- ``function``: the autograd function and ``gated_mlp``.
- ``rerun``: what the GeGLU and SwiGLU rerun adapters share (inputs, providers, cost model).
"""

from kernels.engines.gated_mlp.activation import ACT_GELU_TANH, ACT_SILU
from kernels.engines.gated_mlp.function import GatedMLPFunction, gated_mlp

__all__ = ["ACT_GELU_TANH", "ACT_SILU", "GatedMLPFunction", "gated_mlp"]
