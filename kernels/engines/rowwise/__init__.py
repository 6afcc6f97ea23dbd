"""The adapter of an op over one input x whose rows (or elements) are computed each on its own, y = op(x):
softmax, sparsemax, squared ReLU. Inputs follow the Liger-Kernel scripts that time them: x drawn from a
standard normal; Liger's module against the script's own PyTorch op."""

from __future__ import annotations

import torch

from kernels.adapter import Adapter, Built
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, leaf, numel, per_mode


class RowwiseAdapter(Adapter):
    """y = op(x) over the spec's x; a subclass sets ``KERNEL``, ``FLOPS_PER_ELEMENT`` (forward, backward) and
    its builders, each a ``pass_of`` a function of x."""

    OUTPUT_NAMES = ("y",)
    GRAD_INPUTS = ("x",)
    REFERENCE_DTYPE = torch.float64
    FLOPS_PER_ELEMENT: tuple[int, int]

    def shape(self, params) -> list[int]:
        return input_shapes(self.KERNEL, params)["x"]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        return {"x": Draws(self.KERNEL, params, dtype, seed, device).normal("x")}

    def pass_of(self, op, inputs, label: str) -> Built:
        """A pass of ``op`` over a fresh leaf copy of x."""
        x = leaf(inputs["x"])
        return self.built(lambda: (op(x),), {"x": x}, label)

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward: read x, write y. Backward: read x (or y) and dy, write dx. Full: read x and dy, write y
        and dx."""
        one = numel(self.shape(params)) * RERUN_BYTES[dtype]
        return {"forward": 2 * one, "backward": 3 * one, "full": 4 * one}[mode]

    def flops(self, params, mode) -> int:
        n = numel(self.shape(params))
        forward, backward = self.FLOPS_PER_ELEMENT
        return per_mode(forward * n, backward * n, mode)
