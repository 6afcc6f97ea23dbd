"""LayerNorm's rerun adapter (``kernels._adapter.RerunAdapter``): inputs, reference, providers, cost model.

KernelIndex's provider is ``kernels.engines.norm.layer_norm``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_attr, package_version
from kernels._tensors import generator, input_shapes, leaf_copies, randn, torch_dtype
from kernels.engines.norm import layer_norm
from kernels.engines.norm.rerun import norm_bytes, norm_flops, workload_eps

KERNEL = "layer_norm"
PROVIDERS = ("kernelindex", "liger", "huggingface")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("x", "weight", "bias")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    return {
        "x": randn(s["x"], td, gen, device),
        "weight": randn(s["weight"], td, gen, device, scale=0.1, shift=1.0),
        "bias": randn(s["bias"], td, gen, device, scale=0.1),
    }


def reference(inputs, params):
    eps = workload_eps(params)
    x = inputs["x"]
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return ((x - mean) * torch.rsqrt(var + eps) * inputs["weight"] + inputs["bias"],)


def build(provider, inputs, params) -> Built:
    eps = workload_eps(params)
    x = inputs["x"]
    hidden = x.shape[-1]
    if provider == "kernelindex":
        lv = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (layer_norm(lv["x"], lv["weight"], lv["bias"], eps),), lv,
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
        liger_layer_norm = liger_attr(x, "layer_norm", "LigerLayerNorm")
        module = liger_layer_norm(hidden_size=hidden, eps=eps).to(device=x.device, dtype=x.dtype)
        label = f"Liger-Kernel {package_version('liger-kernel')} LigerLayerNorm"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    with torch.no_grad():
        module.weight.copy_(inputs["weight"])
        module.bias.copy_(inputs["bias"])
    return Built(lambda: (module(x_leaf),), {"x": x_leaf, "weight": module.weight, "bias": module.bias}, label,
                 OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    return norm_bytes(KERNEL, params, dtype, mode, 2)


def flops(params, mode) -> int:
    """Forward: mean, centre, square, sum, scale, weight, bias (about 7 per element); backward about 11."""
    return norm_flops(KERNEL, params, mode, 7, 11)


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
