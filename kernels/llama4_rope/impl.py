"""Llama 4 RoPE's rerun adapter (``kernels._adapter.RerunAdapter``): q and k rotated by complex frequencies.

KernelIndex's provider is ``kernels.llama4_rope.ops.llama4_rope``.
"""

from __future__ import annotations

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_attr, package_version
from kernels._tensors import BYTES_PER_ELEMENT, generator, input_shapes, leaf_copies, numel, randn, torch_dtype
from kernels.llama4_rope.ops import llama4_rope

KERNEL = "llama4_rope"
PROVIDERS = ("kernelindex", "liger", "huggingface")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("q", "k")
GRAD_INPUTS = ("q", "k")
DETERMINISTIC_INPUTS = ("freqs_cis",)
REFERENCE_DTYPE = torch.float64
ROPE_THETA = 500000.0


def freqs_cis_for(seq: int, head_dim: int, device, theta: float = ROPE_THETA) -> torch.Tensor:
    """Complex frequencies [1, seq, head_dim/2] as Llama 4's text rotary embedding builds them (no scaling)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    pos = torch.arange(seq, device=device, dtype=torch.float32)
    angles = torch.outer(pos, inv_freq)
    return torch.polar(torch.ones_like(angles), angles).unsqueeze(0)


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    shapes = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    q = randn(shapes["q"], td, gen, device)
    k = randn(shapes["k"], td, gen, device)
    return {"q": q, "k": k, "freqs_cis": freqs_cis_for(shapes["q"][1], shapes["q"][3], device)}


def reference(inputs, params) -> tuple[torch.Tensor, torch.Tensor]:
    """Complex multiply in the inputs' precision (the comparator upcasts to float64 / complex128)."""
    q, k, f = inputs["q"], inputs["k"], inputs["freqs_cis"]
    f = f.reshape(1, q.shape[1], 1, q.shape[-1] // 2)

    def rot(x):
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(xc * f).flatten(3)

    return rot(q), rot(k)


def _torch_apply_rotary_emb(xq, xk, freqs_cis):
    """PyTorch equivalent of Transformers' Llama 4 ``apply_rotary_emb``."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis[:, :, None, :]).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis[:, :, None, :]).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def build(provider, inputs, params) -> Built:
    leaves = leaf_copies(inputs, GRAD_INPUTS)
    q, k = leaves["q"], leaves["k"]
    f = inputs["freqs_cis"]
    if provider == "kernelindex":
        return Built(lambda: llama4_rope(q, k, f), leaves, "KernelIndex Triton llama4 RoPE (fwd+bwd)", OUTPUT_NAMES)
    if provider == "liger":
        liger_llama4_text_rotary_pos_emb = liger_attr(q, "llama4_rope", "liger_llama4_text_rotary_pos_emb")
        return Built(lambda: liger_llama4_text_rotary_pos_emb(q, k, f), leaves,
                     f"Liger-Kernel {package_version('liger-kernel')} liger_llama4_text_rotary_pos_emb", OUTPUT_NAMES)
    if provider == "huggingface":
        try:
            from transformers.models.llama4.modeling_llama4 import apply_rotary_emb

            label = f"Transformers {package_version('transformers')} llama4 apply_rotary_emb"
        except Exception:  # noqa: BLE001 - without Transformers, its arithmetic in PyTorch
            apply_rotary_emb = _torch_apply_rotary_emb
            label = "PyTorch equivalent of Transformers llama4 apply_rotary_emb"
        return Built(lambda: apply_rotary_emb(q, k, f), leaves, label, OUTPUT_NAMES)
    if provider == "torch":
        return Built(lambda: _torch_apply_rotary_emb(q, k, f), leaves, "PyTorch complex multiply (eager)", OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read q, k, freqs; write q', k'. Backward: read dq', dk', freqs; write dq, dk.
    Full: every distinct input once (q, k, freqs, dq', dk') and every output once (q', k', dq, dk)."""
    shapes = input_shapes(KERNEL, params)
    e = BYTES_PER_ELEMENT[dtype]
    qb, kb = numel(shapes["q"]) * e, numel(shapes["k"]) * e
    fb = shapes["q"][1] * shapes["q"][3] // 2 * BYTES_PER_ELEMENT["complex64"]
    one = 2 * (qb + kb) + fb
    return {"forward": one, "backward": one, "full": 2 * one - fb}[mode]


def flops(params, mode) -> int:
    """A complex multiply is 6 real operations per pair (4 mul + 2 add)."""
    shapes = input_shapes(KERNEL, params)
    pairs = (numel(shapes["q"]) + numel(shapes["k"])) // 2
    one = 6 * pairs
    return {"forward": one, "backward": one, "full": 2 * one}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
