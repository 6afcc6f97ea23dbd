"""Softmax's rerun adapter (``kernels._adapter.RerunAdapter``): softmax over the last dimension of x [rows, cols].

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_softmax.py`` as it stood for its
ingested runs (rows ``M`` = 2048, ``N`` swept, float32 and bfloat16): x drawn from a standard normal,
``LigerSoftmax`` against ``torch.nn.Softmax(dim=-1)``.
"""

from __future__ import annotations

import os
from importlib import import_module
from importlib.metadata import version

import torch

from kernels import lookup
from kernels._adapter import Built, Unavailable

KERNEL = "softmax"
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
    return (torch.softmax(inputs["x"], dim=-1),)


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
        softmax = _liger_class(x, "softmax", "LigerSoftmax")()
        label = f"Liger-Kernel {version('liger-kernel')} LigerSoftmax"
    elif provider == "torch":
        softmax = torch.nn.Softmax(dim=-1)
        label = f"PyTorch {torch.__version__} torch.nn.Softmax(dim=-1)"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    return Built(lambda: (softmax(x),), {"x": x}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read x, write y. Backward: read y and dy, write dx. Full: read x and dy, write y and dx."""
    rows, cols = _shapes(params)["x"]
    one = rows * cols * _BYTES[dtype]
    return {"forward": 2 * one, "backward": 3 * one, "full": 4 * one}[mode]


def flops(params, mode) -> int:
    """Per element: forward 5 (running max, subtract, exp, sum, divide); backward 4 (dy*y, sum,
    subtract the sum, multiply by y)."""
    rows, cols = _shapes(params)["x"]
    n = rows * cols
    return {"forward": 5 * n, "backward": 4 * n, "full": 9 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
