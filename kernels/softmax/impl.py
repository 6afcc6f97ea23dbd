"""Softmax's rerun adapter (``kernels._adapter.RerunAdapter``): softmax over the last dimension of x [rows, cols].

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_softmax.py`` as it stood for its
ingested runs (rows ``M`` = 2048, ``N`` swept, float32 and bfloat16): x drawn from a standard normal,
``LigerSoftmax`` against ``torch.nn.Softmax(dim=-1)``.
"""

from __future__ import annotations

from importlib.metadata import version

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_triton_attr
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, randn, required_input_shapes

KERNEL = "softmax"
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
    return (torch.softmax(inputs["x"], dim=-1),)


def build(provider, inputs, params) -> Built:
    x = inputs["x"].detach().clone().requires_grad_(True)
    if provider == "liger":
        softmax = liger_triton_attr(x, "softmax", "LigerSoftmax")()
        label = f"Liger-Kernel {version('liger-kernel')} LigerSoftmax"
    elif provider == "torch":
        softmax = torch.nn.Softmax(dim=-1)
        label = f"PyTorch {torch.__version__} torch.nn.Softmax(dim=-1)"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    return Built(lambda: (softmax(x),), {"x": x}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read x, write y. Backward: read y and dy, write dx. Full: read x and dy, write y and dx."""
    rows, cols = required_input_shapes(KERNEL, params)["x"]
    one = rows * cols * RERUN_BYTES[dtype]
    return {"forward": 2 * one, "backward": 3 * one, "full": 4 * one}[mode]


def flops(params, mode) -> int:
    """Per element: forward 5 (running max, subtract, exp, sum, divide); backward 4 (dy*y, sum,
    subtract the sum, multiply by y)."""
    rows, cols = required_input_shapes(KERNEL, params)["x"]
    n = rows * cols
    return {"forward": 5 * n, "backward": 4 * n, "full": 9 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
