"""Squared ReLU's rerun adapter (``kernels._adapter.RerunAdapter``): relu(x) ** 2, elementwise on x [rows, hidden].

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_relu_squared.py`` (rows ``M`` = 4096,
``N`` swept, bfloat16): x drawn from a standard normal, ``LigerReLUSquared`` against the script's own
PyTorch module (``relu`` then ``square``), which this adapter restates since the script is not an
importable package.
"""

from __future__ import annotations

import math
import os
from importlib import import_module
from importlib.metadata import version

import torch
import torch.nn.functional as F

from kernels import lookup
from kernels._adapter import Built, Unavailable

KERNEL = "relu_squared"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("x",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def _shapes(params) -> dict[str, list[int]]:
    tensors = lookup(KERNEL).input_tensors(params, None)
    if tensors is None:
        raise ValueError(f"{KERNEL}: the spec gives no input shapes for parameters {dict(params)}")
    return {t["name"]: t["shape"] for t in tensors}


def _generator(seed, device) -> torch.Generator:
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    shape = _shapes(params)["x"]
    gen = _generator(seed, device)
    x = torch.randn(tuple(shape), generator=gen, device=device, dtype=torch.float32)
    return {"x": x.to(_DTYPES[dtype])}


def reference(inputs, params) -> tuple[torch.Tensor]:
    return (F.relu(inputs["x"]) ** 2,)


def torch_relu_squared(x: torch.Tensor) -> torch.Tensor:
    """PyTorch equivalent of upstream benchmark_relu_squared.py's TorchReLUSquared: relu, then square."""
    return torch.square(F.relu(x))


def _liger_class(tensor, module, name):
    """A Liger-Kernel class; its Triton kernels need CUDA, or Triton's CPU interpreter in tests."""
    if not tensor.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise Unavailable("liger_kernel's Triton kernels need a CUDA device (or TRITON_INTERPRET=1)")
    try:
        return getattr(import_module(f"liger_kernel.transformers.{module}"), name)
    except Exception as exc:  # noqa: BLE001 - any import-time failure makes the provider unavailable
        raise Unavailable(f"liger_kernel not importable: {exc}") from exc


def build(provider, inputs, params) -> Built:
    x = inputs["x"].detach().clone().requires_grad_(True)
    if provider == "liger":
        module = _liger_class(x, "relu_squared", "LigerReLUSquared")()
        label = f"Liger-Kernel {version('liger-kernel')} LigerReLUSquared"
        return Built(lambda: (module(x),), {"x": x}, label, OUTPUT_NAMES)
    if provider == "torch":
        label = f"PyTorch {torch.__version__} equivalent of upstream benchmark_relu_squared.py's TorchReLUSquared"
        return Built(lambda: (torch_relu_squared(x),), {"x": x}, label, OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read x, write y. Backward: read x and dy, write dx. Full: read x and dy, write y and dx."""
    one = math.prod(_shapes(params)["x"]) * _BYTES[dtype]
    return {"forward": 2 * one, "backward": 3 * one, "full": 4 * one}[mode]


def flops(params, mode) -> int:
    """Per element: forward 2 (max with zero, square); backward 3 (mask, 2 * x, times dy)."""
    n = math.prod(_shapes(params)["x"])
    return {"forward": 2 * n, "backward": 3 * n, "full": 5 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
