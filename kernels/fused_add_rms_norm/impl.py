"""Fused add + RMSNorm's rerun adapter (``kernels._adapter.RerunAdapter``): s = x + residual,
y = s * rsqrt(mean(s^2) + eps) * weight, over x and residual [rows, hidden]; outputs y and s.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_fused_add_rms_norm.py``: x and residual drawn
from a normal distribution; the weight (ones upstream) drawn near one so that its gradient is checked
against non-trivial values. Both outputs take upstream gradients, as the script's backward does.
"""

from __future__ import annotations

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf_copies, randn

KERNEL = "fused_add_rms_norm"
# "huggingface" (the script's first name) and "torch" (its current one) are the script's NaiveAddRMSNorm.
PROVIDERS = ("liger_fused_add_rms_norm", "liger_rms_norm", "huggingface", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y", "residual_out")
GRAD_INPUTS = ("x", "residual", "weight")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
EPS = 1e-6


def _eps(params) -> float:
    return float(params.get("eps", EPS))


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    return {
        "x": randn(s["x"], td, gen, device),
        "residual": randn(s["residual"], td, gen, device),
        "weight": randn(s["weight"], td, gen, device, scale=0.1, shift=1.0),
    }


def reference(inputs, params):
    s = inputs["x"] + inputs["residual"]
    y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + _eps(params)) * inputs["weight"]
    return y, s


def _naive_add_rms_norm(x, residual, weight, eps):
    """The upstream script's NaiveAddRMSNorm.forward: add and normalize in float32, scale in the input dtype."""
    h = x.to(torch.float32) + residual.to(torch.float32)
    s = h
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype), s.to(x.dtype)


def _add_liger_rms_norm(x, residual, weight, rms_norm):
    """The upstream script's AddLigerRMSNorm.forward: the add in eager PyTorch, then Liger's RMSNorm (its
    own weight left at ones, in float32 as upstream) and the outer weight in the input dtype."""
    h = x.to(torch.float32) + residual.to(torch.float32)
    s = h
    return weight * rms_norm(h).to(x.dtype), s.to(x.dtype)


def build(provider, inputs, params) -> Built:
    eps = _eps(params)
    x = inputs["x"]
    hidden = x.shape[-1]
    leaves = leaf_copies(inputs, GRAD_INPUTS)
    lx, lr, lw = leaves["x"], leaves["residual"], leaves["weight"]
    if provider == "liger_fused_add_rms_norm":
        liger_fused = liger_triton_attr(x, "fused_add_rms_norm", "LigerFusedAddRMSNorm", LIGER_TRITON_NEEDS_ON_CPU)
        module = liger_fused(hidden_size=hidden, eps=eps)
        module = module.to(device=x.device, dtype=x.dtype)
        with torch.no_grad():
            module.weight.copy_(inputs["weight"])
        leaves["weight"] = module.weight
        return Built(lambda: module(lx, lr), leaves,
                     f"Liger-Kernel {version_label('liger-kernel')} LigerFusedAddRMSNorm (Triton)", OUTPUT_NAMES)
    if provider == "liger_rms_norm":
        liger_rms_norm = liger_triton_attr(x, "rms_norm", "LigerRMSNorm", LIGER_TRITON_NEEDS_ON_CPU)
        rms_norm = liger_rms_norm(hidden, eps, in_place=False).to(x.device)
        return Built(lambda: _add_liger_rms_norm(lx, lr, lw, rms_norm), leaves,
                     f"eager add + Liger-Kernel {version_label('liger-kernel')} LigerRMSNorm "
                     "(upstream AddLigerRMSNorm)",
                     OUTPUT_NAMES)
    if provider in ("huggingface", "torch"):
        return Built(lambda: _naive_add_rms_norm(lx, lr, lw, eps), leaves,
                     f"PyTorch eager add + RMSNorm (upstream NaiveAddRMSNorm, its {provider} provider)", OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def bytes_moved(params, dtype, mode) -> int:
    """Forward reads x, residual, weight and writes y and s; backward reads dy, ds, s (or x and residual)
    and weight and writes dx, dresidual (one tensor in a fused kernel, counted once) and dweight; full reads
    x, residual, weight, dy, ds once and writes y, s, dx and dweight. Per-row rstd is not counted."""
    s = input_shapes(KERNEL, params)
    e = RERUN_BYTES[dtype]
    xb = s["x"][0] * s["x"][1] * e
    wb = s["weight"][0] * e
    return {"forward": 4 * xb + wb, "backward": 4 * xb + 2 * wb, "full": 7 * xb + 2 * wb}[mode]


def flops(params, mode) -> int:
    """Per element: forward about 5 (add, square, sum, normalize, scale); backward about 9 (RMSNorm's 8
    plus adding ds into the gradient of the sum)."""
    s = input_shapes(KERNEL, params)
    n = s["x"][0] * s["x"][1]
    return {"forward": 5 * n, "backward": 9 * n, "full": 14 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
