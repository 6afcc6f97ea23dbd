"""LayerNorm over the last dimension: the norm kernels of ``kernels.rms_norm.impl`` with mean and bias."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels._impl_common import (
    Built,
    Unavailable,
    generator,
    leaf_copies,
    liger_attr,
    package_version,
    randn,
    torch_dtype,
)
from kernels.rms_norm.impl import DEFAULT_EPS, _eps, _shapes, kernelindex_layer_norm, norm_bytes, norm_flops

KERNEL = "layer_norm"
GRAD_INPUTS = ("x", "weight", "bias")
OUTPUT_NAMES = ("y",)
PROVIDERS = ("kernelindex", "liger", "huggingface")
REFERENCE_DTYPE = torch.float64


def make_inputs(params: dict, dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
    s = _shapes(KERNEL, params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    return {
        "x": randn(s["x"], td, gen, device),
        "weight": randn(s["weight"], td, gen, device, scale=0.1, shift=1.0),
        "bias": randn(s["bias"], td, gen, device, scale=0.1),
    }


def reference(inputs: dict, params: dict | None = None):
    eps = _eps(params or {})
    x = inputs["x"]
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return ((x - mean) * torch.rsqrt(var + eps) * inputs["weight"] + inputs["bias"],)


def build(provider: str, inputs: dict, params: dict | None = None) -> Built:
    eps = _eps(params or {})
    x = inputs["x"]
    hidden = x.shape[-1]
    if provider == "kernelindex":
        lv = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (kernelindex_layer_norm(lv["x"], lv["weight"], lv["bias"], eps),), lv,
                     "KernelIndex Triton LayerNorm (fwd+bwd)", OUTPUT_NAMES)
    if provider == "torch":
        lv = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (F.layer_norm(lv["x"], (hidden,), lv["weight"], lv["bias"], eps),), lv,
                     f"PyTorch {torch.__version__} F.layer_norm", OUTPUT_NAMES)
    x_leaf = x.detach().clone().requires_grad_(True)
    if provider == "huggingface":
        # The upstream benchmark's "huggingface" LayerNorm is torch.nn.LayerNorm.
        module = torch.nn.LayerNorm(hidden, eps=eps).to(device=x.device, dtype=x.dtype)
        label = f"torch.nn.LayerNorm (PyTorch {torch.__version__}), the upstream benchmark's huggingface provider"
    elif provider == "liger":
        LigerLayerNorm = liger_attr(x, "layer_norm", "LigerLayerNorm")
        module = LigerLayerNorm(hidden_size=hidden, eps=eps).to(device=x.device, dtype=x.dtype)
        label = f"Liger-Kernel {package_version('liger-kernel')} LigerLayerNorm"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    with torch.no_grad():
        module.weight.copy_(inputs["weight"])
        module.bias.copy_(inputs["bias"])
    return Built(lambda: (module(x_leaf),), {"x": x_leaf, "weight": module.weight, "bias": module.bias}, label,
                 OUTPUT_NAMES, extra={"module": module})


def bytes_moved(params, dtype, mode) -> int:
    return norm_bytes(KERNEL, params, dtype, mode, 2)


def flops(params, mode) -> int:
    """Forward: mean, centre, square, sum, scale, weight, bias (about 7 per element); backward about 11."""
    return norm_flops(KERNEL, params, mode, 7, 11)


__all__ = ["DEFAULT_EPS", "GRAD_INPUTS", "OUTPUT_NAMES", "build", "bytes_moved", "flops", "make_inputs", "reference"]
