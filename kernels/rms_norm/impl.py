"""RMSNorm's rerun adapter (``kernels._adapter.RerunAdapter``): inputs, reference, providers, cost model.

KernelIndex's provider is ``kernels.engines.norm.rms_norm``.
"""

from __future__ import annotations

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_attr, package_version
from kernels._tensors import generator, input_shapes, leaf_copies, randn, torch_dtype
from kernels.engines.norm import rms_norm
from kernels.engines.norm.rerun import norm_bytes, norm_flops, workload_eps

KERNEL = "rms_norm"
PROVIDERS = ("kernelindex", "liger", "huggingface")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("x", "weight")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    return {"x": randn(s["x"], td, gen, device), "weight": randn(s["weight"], td, gen, device, scale=0.1, shift=1.0)}


def reference(inputs, params):
    eps = workload_eps(params)
    x, w = inputs["x"], inputs["weight"]
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w,)


def _torch_llama_rms_norm(x, w, eps):
    """PyTorch equivalent of Transformers LlamaRMSNorm.forward."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def build(provider, inputs, params) -> Built:
    eps = workload_eps(params)
    x = inputs["x"]
    hidden = x.shape[-1]
    if provider == "kernelindex":
        leaves = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (rms_norm(leaves["x"], leaves["weight"], eps),), leaves,
                     "KernelIndex Triton RMSNorm (fwd+bwd)", OUTPUT_NAMES)
    if provider == "torch":
        leaves = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (_torch_llama_rms_norm(leaves["x"], leaves["weight"], eps),), leaves,
                     "PyTorch eager RMSNorm (LlamaRMSNorm arithmetic)", OUTPUT_NAMES)
    x_leaf = x.detach().clone().requires_grad_(True)
    if provider == "huggingface":
        try:
            from transformers.models.llama.modeling_llama import LlamaRMSNorm
        except ImportError:
            leaves = leaf_copies(inputs, GRAD_INPUTS)
            return Built(lambda: (_torch_llama_rms_norm(leaves["x"], leaves["weight"], eps),), leaves,
                         "PyTorch equivalent of Transformers LlamaRMSNorm", OUTPUT_NAMES)
        module = LlamaRMSNorm(hidden, eps=eps).to(device=x.device, dtype=x.dtype)
        label = f"Transformers {package_version('transformers')} LlamaRMSNorm"
    elif provider == "liger":
        liger_rms_norm = liger_attr(x, "rms_norm", "LigerRMSNorm")
        module = liger_rms_norm(hidden_size=hidden, eps=eps).to(device=x.device, dtype=x.dtype)
        label = f"Liger-Kernel {package_version('liger-kernel')} LigerRMSNorm"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    with torch.no_grad():
        module.weight.copy_(inputs["weight"])
    return Built(lambda: (module(x_leaf),), {"x": x_leaf, "weight": module.weight}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    return norm_bytes(KERNEL, params, dtype, mode, 1)


def flops(params, mode) -> int:
    """Forward: square, sum, scale, weight (4 per element); backward about 8 per element."""
    return norm_flops(KERNEL, params, mode, 4, 8)


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
