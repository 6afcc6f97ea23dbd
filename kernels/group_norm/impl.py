"""GroupNorm's rerun adapter (``kernels._adapter.RerunAdapter``): x [rows, channels, hidden], per-channel
weight and bias, ``channels // channels_per_group`` groups.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_group_norm.py``: x drawn from a normal
distribution; the layers' weight and bias (ones and zeros upstream) are drawn near those values so that
their gradients are checked against non-trivial values.
"""

from __future__ import annotations

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, randn

KERNEL = "group_norm"
# Upstream's "huggingface" (its first script) and "torch" (its current one) are both torch.nn.GroupNorm;
# "liger_triton" is the cuTile comparison's name for Liger's Triton kernel.
PROVIDERS = ("liger", "liger_triton", "huggingface", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("x", "weight", "bias")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
# The upstream script's extra benchmark config, used where a workload leaves them out.
CHANNELS_PER_GROUP = 4
EPS = 1e-6


def _eps(params) -> float:
    return float(params.get("eps", EPS))


def _groups(params, channels: int) -> int:
    return channels // int(params.get("channels_per_group", CHANNELS_PER_GROUP))


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    return {
        "x": randn(s["x"], td, gen, device),
        "weight": randn(s["weight"], td, gen, device, scale=0.1, shift=1.0),
        "bias": randn(s["bias"], td, gen, device, scale=0.1),
    }


def reference(inputs, params):
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    rows, channels = x.shape[0], x.shape[1]
    g = x.reshape(rows, _groups(params, channels), -1)
    mean = g.mean(-1, keepdim=True)
    var = (g - mean).pow(2).mean(-1, keepdim=True)
    y = ((g - mean) * torch.rsqrt(var + _eps(params))).reshape(x.shape)
    return (y * w[None, :, None] + b[None, :, None],)


def build(provider, inputs, params) -> Built:
    x = inputs["x"]
    channels = x.shape[1]
    groups, eps = _groups(params, channels), _eps(params)
    if provider in ("liger", "liger_triton"):
        liger_group_norm = liger_triton_attr(x, "group_norm", "LigerGroupNorm", LIGER_TRITON_NEEDS_ON_CPU)
        module = liger_group_norm(num_channels=channels, num_groups=groups, eps=eps)
        label = f"Liger-Kernel {version_label('liger-kernel')} LigerGroupNorm (Triton)"
    elif provider in ("huggingface", "torch"):
        module = torch.nn.GroupNorm(num_groups=groups, num_channels=channels, eps=eps)
        label = f"torch.nn.GroupNorm (PyTorch {torch.__version__}), upstream's {provider} provider"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    module = module.to(device=x.device, dtype=x.dtype)
    with torch.no_grad():
        module.weight.copy_(inputs["weight"])
        module.bias.copy_(inputs["bias"])
    x_leaf = x.detach().clone().requires_grad_(True)
    return Built(lambda: (module(x_leaf),), {"x": x_leaf, "weight": module.weight, "bias": module.bias}, label,
                 OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward reads x, weight, bias and writes y; backward reads dy, x, weight and writes dx, dweight,
    dbias; full reads x, weight, bias, dy once and writes y, dx, dweight, dbias. The saved per-group
    mean and rstd are not counted."""
    s = input_shapes(KERNEL, params)
    e = RERUN_BYTES[dtype]
    xb = s["x"][0] * s["x"][1] * s["x"][2] * e
    cb = s["weight"][0] * e
    return {"forward": 2 * xb + 2 * cb, "backward": 3 * xb + 3 * cb, "full": 4 * xb + 4 * cb}[mode]


def flops(params, mode) -> int:
    """Per element of x: forward about 7 (mean, centre, square, sum, normalize, scale, shift); backward
    about 11 (the two group reductions, dx, and the weight and bias reductions)."""
    x = input_shapes(KERNEL, params)["x"]
    n = x[0] * x[1] * x[2]
    return {"forward": 7 * n, "backward": 11 * n, "full": 18 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
