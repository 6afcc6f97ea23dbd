"""Squared ReLU's rerun adapter: relu(x) ** 2, elementwise on x [rows, hidden].

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_relu_squared.py`` (rows ``M`` = 4096,
``N`` swept, bfloat16): x drawn from a standard normal, ``LigerReLUSquared`` against the script's own
PyTorch module (``relu`` then ``square``), which this adapter restates since the script is not an
importable package.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.providers import liger_attr, liger_label
from kernels.engines.rowwise import RowwiseAdapter


def torch_relu_squared(x: torch.Tensor) -> torch.Tensor:
    """PyTorch equivalent of upstream benchmark_relu_squared.py's TorchReLUSquared: relu, then square."""
    return torch.square(F.relu(x))


class ReLUSquared(RowwiseAdapter):
    KERNEL = "relu_squared"
    # Per element: forward 2 (max with zero, square); backward 3 (mask, 2 * x, times dy).
    FLOPS_PER_ELEMENT = (2, 3)

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        return (F.relu(inputs["x"]) ** 2,)

    def _liger(self, provider, inputs, params):
        module = liger_attr(inputs["x"], "relu_squared", "LigerReLUSquared")()
        return self.pass_of(module, inputs, liger_label("LigerReLUSquared"))

    def _torch(self, provider, inputs, params):
        label = f"PyTorch {torch.__version__} equivalent of upstream benchmark_relu_squared.py's TorchReLUSquared"
        return self.pass_of(torch_relu_squared, inputs, label)

    BUILDERS = {"liger": _liger, "torch": _torch}


ADAPTER = ReLUSquared()
