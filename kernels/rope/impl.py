"""Llama-style rotary embedding (cos/sin tables, rotate_half): inputs, references, providers, Triton kernel.

q [batch, q_heads, seq, head_dim], k [batch, kv_heads, seq, head_dim], cos/sin [1, seq, head_dim] as
Transformers' ``LlamaRotaryEmbedding`` returns them (the two halves of each row repeat). With
x = (x1, x2) split at head_dim/2: out = x * cos + (-x2, x1) * sin. The backward pass applies the
transpose: dx1 = dy1 c1 + dy2 s2, dx2 = dy2 c2 - dy1 s1.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import kernels
from kernels._impl_common import (
    BYTES_PER_ELEMENT,
    Built,
    CachedLaunch,
    Unavailable,
    generator,
    leaf_copies,
    liger_attr,
    numel,
    package_version,
    randn,
    torch_dtype,
)

KERNEL = "rope"
GRAD_INPUTS = ("q", "k")
OUTPUT_NAMES = ("q", "k")
PROVIDERS = ("kernelindex", "liger", "huggingface")
REFERENCE_DTYPE = torch.float64
ROPE_THETA = 10000.0
# Position tables: computed, not drawn (the same for every seed).
DETERMINISTIC_INPUTS = ("cos", "sin")


def _shapes(params):
    return {t["name"]: t["shape"] for t in kernels.lookup(KERNEL).input_tensors(params, None)}


def cos_sin_for(seq: int, head_dim: int, dtype, device, theta: float = ROPE_THETA):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype).unsqueeze(0), emb.sin().to(dtype).unsqueeze(0)


def make_inputs(params: dict, dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
    s = _shapes(params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    q = randn(s["q"], td, gen, device)
    k = randn(s["k"], td, gen, device)
    cos, sin = cos_sin_for(s["q"][2], s["q"][3], td, device)
    return {"q": q, "k": k, "cos": cos, "sin": sin}


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def reference(inputs: dict, params: dict | None = None):
    cos, sin = inputs["cos"].unsqueeze(1), inputs["sin"].unsqueeze(1)
    q, k = inputs["q"], inputs["k"]
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


# --------------------------------------------------------------------------------------------------


@triton.jit
def _rope_tile(x_ptr, o_ptr, b, seqs, seq_ok, seq_len, c1, c2, s1, s2, BACKWARD: tl.constexpr,
               H: tl.constexpr, BH: tl.constexpr, D: tl.constexpr):
    h = tl.arange(0, BH)
    d = tl.arange(0, D // 2)
    base = (b.to(tl.int64) * H + h[:, None, None]) * seq_len * D + seqs[None, :, None] * D + d[None, None, :]
    mask = (h[:, None, None] < H) & seq_ok[None, :, None]
    x1 = tl.load(x_ptr + base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + D // 2, mask=mask, other=0.0).to(tl.float32)
    if BACKWARD:
        y1 = x1 * c1 + x2 * s2
        y2 = x2 * c2 - x1 * s1
    else:
        y1 = x1 * c1 - x2 * s1
        y2 = x2 * c2 + x1 * s2
    tl.store(o_ptr + base, y1.to(o_ptr.dtype.element_ty), mask=mask)
    tl.store(o_ptr + base + D // 2, y2.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kernel(q_ptr, k_ptr, qo_ptr, ko_ptr, cos_ptr, sin_ptr, seq_len, n_seq_blocks, BACKWARD: tl.constexpr,
                 HQ: tl.constexpr, HK: tl.constexpr, BHQ: tl.constexpr, BHK: tl.constexpr, D: tl.constexpr,
                 BLOCK_S: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // n_seq_blocks
    seqs = (pid % n_seq_blocks) * BLOCK_S + tl.arange(0, BLOCK_S)
    seq_ok = seqs < seq_len
    d = tl.arange(0, D // 2)
    t_off = seqs[:, None] * D + d[None, :]
    c1 = tl.load(cos_ptr + t_off, mask=seq_ok[:, None], other=0.0).to(tl.float32)[None, :, :]
    c2 = tl.load(cos_ptr + t_off + D // 2, mask=seq_ok[:, None], other=0.0).to(tl.float32)[None, :, :]
    s1 = tl.load(sin_ptr + t_off, mask=seq_ok[:, None], other=0.0).to(tl.float32)[None, :, :]
    s2 = tl.load(sin_ptr + t_off + D // 2, mask=seq_ok[:, None], other=0.0).to(tl.float32)[None, :, :]
    _rope_tile(q_ptr, qo_ptr, b, seqs, seq_ok, seq_len, c1, c2, s1, s2, BACKWARD, HQ, BHQ, D)
    _rope_tile(k_ptr, ko_ptr, b, seqs, seq_ok, seq_len, c1, c2, s1, s2, BACKWARD, HK, BHK, D)


_LAUNCH = CachedLaunch(_rope_kernel)


def _launch(q, k, cos, sin, backward: bool):
    bsz, hq, seq, d = q.shape
    hk = k.shape[1]
    if d & (d - 1):
        raise ValueError(f"head_dim must be a power of two, got {d}")
    q = q if q.is_contiguous() else q.contiguous()
    k = k if k.is_contiguous() else k.contiguous()
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    bhq = triton.next_power_of_2(hq)
    block_s = max(1, min(64, 4096 // (bhq * d)))
    n_seq_blocks = triton.cdiv(seq, block_s)
    bhk = triton.next_power_of_2(hk)
    num_warps = 4 if block_s * bhq * d <= 4096 else 8
    key = (q.dtype, cos.dtype, q.device.index, bsz, seq, hq, hk, d, block_s, backward)
    _LAUNCH((bsz * n_seq_blocks,), key,
            (q, k, qo, ko, cos, sin, seq, n_seq_blocks, backward, hq, hk, bhq, bhk, d, block_s), num_warps,
            tensors=(q, k, qo, ko, cos, sin))
    return qo, ko


def _tables(cos, sin, seq, d):
    """cos/sin as contiguous [seq, head_dim] (batch 1 positions shared by every batch row)."""
    c = cos.reshape(-1, seq, d)[0]
    s = sin.reshape(-1, seq, d)[0]
    return (c if c.is_contiguous() else c.contiguous()), (s if s.is_contiguous() else s.contiguous())


class KernelIndexRope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, cos, sin):
        c, s = _tables(cos, sin, q.shape[2], q.shape[3])
        ctx.save_for_backward(c, s)
        return _launch(q, k, c, s, False)

    @staticmethod
    def backward(ctx, dq, dk):
        c, s = ctx.saved_tensors
        dqi, dki = _launch(dq, dk, c, s, True)
        return dqi, dki, None, None


def kernelindex_rope(q, k, cos, sin):
    return KernelIndexRope.apply(q, k, cos, sin)


def _torch_apply_rotary_pos_emb(q, k, cos, sin):
    """PyTorch equivalent of Transformers' Llama ``apply_rotary_pos_emb`` (unsqueeze_dim=1)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def build(provider: str, inputs: dict, params: dict | None = None) -> Built:
    leaves = leaf_copies(inputs, GRAD_INPUTS)
    q, k = leaves["q"], leaves["k"]
    cos, sin = inputs["cos"], inputs["sin"]
    if provider == "kernelindex":
        return Built(lambda: kernelindex_rope(q, k, cos, sin), leaves, "KernelIndex Triton RoPE (fwd+bwd)",
                     OUTPUT_NAMES)
    if provider == "liger":
        liger_rotary_pos_emb = liger_attr(q, "rope", "liger_rotary_pos_emb")
        return Built(lambda: liger_rotary_pos_emb(q, k, cos, sin), leaves,
                     f"Liger-Kernel {package_version('liger-kernel')} liger_rotary_pos_emb", OUTPUT_NAMES)
    if provider == "huggingface":
        try:
            from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

            label = f"Transformers {package_version('transformers')} llama apply_rotary_pos_emb"
        except Exception:  # noqa: BLE001
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
    s = _shapes(params)
    e = BYTES_PER_ELEMENT[dtype]
    qk = (numel(s["q"]) + numel(s["k"])) * e
    tables = (numel(s["cos"]) + numel(s["sin"])) * e
    one = 2 * qk + tables
    return {"forward": one, "backward": one, "full": 2 * one - tables}[mode]


def flops(params, mode) -> int:
    """Two multiplies and one add per element."""
    s = _shapes(params)
    one = 3 * (numel(s["q"]) + numel(s["k"]))
    return {"forward": one, "backward": one, "full": 2 * one}[mode]
