"""Squared ReLU's rerun adapter (``kernels._adapter.RerunAdapter``): relu(x) ** 2, elementwise on x [rows, hidden].

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_relu_squared.py`` (rows ``M`` = 4096,
``N`` swept, bfloat16): x drawn from a standard normal, ``LigerReLUSquared`` against the script's own
PyTorch module (``relu`` then ``square``), which this adapter restates since the script is not an
importable package.
"""

from __future__ import annotations

from importlib.metadata import version

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_triton_attr
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, numel, randn, required_input_shapes

KERNEL = "relu_squared"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("x",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    shape = required_input_shapes(KERNEL, params)["x"]
    return {"x": randn(shape, RERUN_DTYPES[dtype], generator(seed, device), device)}


def reference(inputs, params) -> tuple[torch.Tensor]:
    return (F.relu(inputs["x"]) ** 2,)


def torch_relu_squared(x: torch.Tensor) -> torch.Tensor:
    """PyTorch equivalent of upstream benchmark_relu_squared.py's TorchReLUSquared: relu, then square."""
    return torch.square(F.relu(x))


def build(provider, inputs, params) -> Built:
    x = inputs["x"].detach().clone().requires_grad_(True)
    if provider == "liger":
        module = liger_triton_attr(x, "relu_squared", "LigerReLUSquared")()
        label = f"Liger-Kernel {version('liger-kernel')} LigerReLUSquared"
        return Built(lambda: (module(x),), {"x": x}, label, OUTPUT_NAMES)
    if provider == "torch":
        label = f"PyTorch {torch.__version__} equivalent of upstream benchmark_relu_squared.py's TorchReLUSquared"
        return Built(lambda: (torch_relu_squared(x),), {"x": x}, label, OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read x, write y. Backward: read x and dy, write dx. Full: read x and dy, write y and dx."""
    one = numel(required_input_shapes(KERNEL, params)["x"]) * RERUN_BYTES[dtype]
    return {"forward": 2 * one, "backward": 3 * one, "full": 4 * one}[mode]


def flops(params, mode) -> int:
    """Per element: forward 2 (max with zero, square); backward 3 (mask, 2 * x, times dy)."""
    n = numel(required_input_shapes(KERNEL, params)["x"])
    return {"forward": 2 * n, "backward": 3 * n, "full": 5 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
