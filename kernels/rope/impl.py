"""RoPE's rerun adapter (``kernels._adapter.RerunAdapter``): Llama-style rotary embedding of q and k.

q [batch, q_heads, seq, head_dim], k [batch, kv_heads, seq, head_dim], cos/sin [1, seq, head_dim] as
Transformers' ``LlamaRotaryEmbedding`` returns them. KernelIndex's provider is ``kernels.rope.ops.rope``.
"""

from __future__ import annotations

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_attr, package_version
from kernels._tensors import BYTES_PER_ELEMENT, generator, input_shapes, leaf_copies, numel, randn, torch_dtype
from kernels.rope.ops import rope

KERNEL = "rope"
PROVIDERS = ("kernelindex", "liger", "huggingface")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("q", "k")
GRAD_INPUTS = ("q", "k")
DETERMINISTIC_INPUTS = ("cos", "sin")
REFERENCE_DTYPE = torch.float64
ROPE_THETA = 10000.0


def cos_sin_for(seq: int, head_dim: int, dtype, device, theta: float = ROPE_THETA):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype).unsqueeze(0), emb.sin().to(dtype).unsqueeze(0)


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    q = randn(s["q"], td, gen, device)
    k = randn(s["k"], td, gen, device)
    cos, sin = cos_sin_for(s["q"][2], s["q"][3], td, device)
    return {"q": q, "k": k, "cos": cos, "sin": sin}


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def reference(inputs, params):
    cos, sin = inputs["cos"].unsqueeze(1), inputs["sin"].unsqueeze(1)
    q, k = inputs["q"], inputs["k"]
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _torch_apply_rotary_pos_emb(q, k, cos, sin):
    """PyTorch equivalent of Transformers' Llama ``apply_rotary_pos_emb`` (unsqueeze_dim=1)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def build(provider, inputs, params) -> Built:
    leaves = leaf_copies(inputs, GRAD_INPUTS)
    q, k = leaves["q"], leaves["k"]
    cos, sin = inputs["cos"], inputs["sin"]
    if provider == "kernelindex":
        return Built(lambda: rope(q, k, cos, sin), leaves, "KernelIndex Triton RoPE (fwd+bwd)", OUTPUT_NAMES)
    if provider == "liger":
        liger_rotary_pos_emb = liger_attr(q, "rope", "liger_rotary_pos_emb")
        return Built(lambda: liger_rotary_pos_emb(q, k, cos, sin), leaves,
                     f"Liger-Kernel {package_version('liger-kernel')} liger_rotary_pos_emb", OUTPUT_NAMES)
    if provider == "huggingface":
        try:
            from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

            label = f"Transformers {package_version('transformers')} llama apply_rotary_pos_emb"
        except Exception:  # noqa: BLE001 - without Transformers, its arithmetic in PyTorch
            apply_rotary_pos_emb = _torch_apply_rotary_pos_emb
            label = "PyTorch equivalent of Transformers llama apply_rotary_pos_emb"
        return Built(lambda: apply_rotary_pos_emb(q, k, cos, sin), leaves, label, OUTPUT_NAMES)
    if provider == "torch":
        return Built(lambda: _torch_apply_rotary_pos_emb(q, k, cos, sin), leaves, "PyTorch eager rotate_half",
                     OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read q, k, cos, sin; write q', k'. Backward: read dq', dk', cos, sin; write dq, dk.
    Full: distinct inputs once (q, k, cos, sin, dq', dk'), outputs once (q', k', dq, dk)."""
    s = input_shapes(KERNEL, params)
    e = BYTES_PER_ELEMENT[dtype]
    qk = (numel(s["q"]) + numel(s["k"])) * e
    tables = (numel(s["cos"]) + numel(s["sin"])) * e
    one = 2 * qk + tables
    return {"forward": one, "backward": one, "full": 2 * one - tables}[mode]


def flops(params, mode) -> int:
    """Two multiplies and one add per element."""
    s = input_shapes(KERNEL, params)
    one = 3 * (numel(s["q"]) + numel(s["k"]))
    return {"forward": one, "backward": one, "full": 2 * one}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
