"""Llama-style rotary embedding (cos/sin tables, rotate_half) as a Triton kernel and an autograd function.

q [batch, q_heads, seq, head_dim], k [batch, kv_heads, seq, head_dim], cos/sin [seq, head_dim] (the two
halves of each row repeat). With x = (x1, x2) split at head_dim/2: out = x * cos + (-x2, x1) * sin. The
backward pass applies the transpose: dx1 = dy1 c1 + dy2 s2, dx2 = dy2 c2 - dy1 s1.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import CachedLaunch

# A program rotates up to MAX_POSITIONS positions of every q and k head, so each position's cos/sin is
# loaded once for all heads; as many positions as keep its q tile within TILE_ELEMENTS, and 8 warps
# instead of 4 where one position's heads alone exceed it. Set from the first GPU rerun
# (h200-2026-12-02.jsonl.gz), not swept since: the kernel runs at 90% of copy bandwidth at its largest size.
MAX_POSITIONS = 64
TILE_ELEMENTS = 4096


@triton.jit
def _rope_tile(
    x_ptr,
    o_ptr,
    b,
    seqs,
    seq_ok,
    seq_len,
    c1,
    c2,
    s1,
    s2,
    BACKWARD: tl.constexpr,
    H: tl.constexpr,
    BH: tl.constexpr,
    D: tl.constexpr,
):
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
def _rope_kernel(
    q_ptr,
    k_ptr,
    qo_ptr,
    ko_ptr,
    cos_ptr,
    sin_ptr,
    seq_len,
    n_seq_blocks,
    BACKWARD: tl.constexpr,
    HQ: tl.constexpr,
    HK: tl.constexpr,
    BHQ: tl.constexpr,
    BHK: tl.constexpr,
    D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
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


def launch(q, k, cos, sin, backward: bool):
    """(q', k'): q and k rotated (``backward``: by the transpose); cos/sin contiguous [seq, head_dim]."""
    bsz, hq, seq, d = q.shape
    hk = k.shape[1]
    if d & (d - 1):
        raise ValueError(f"head_dim must be a power of two, got {d}")
    q = q if q.is_contiguous() else q.contiguous()
    k = k if k.is_contiguous() else k.contiguous()
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    bhq = triton.next_power_of_2(hq)
    block_s = max(1, min(MAX_POSITIONS, TILE_ELEMENTS // (bhq * d)))
    n_seq_blocks = triton.cdiv(seq, block_s)
    bhk = triton.next_power_of_2(hk)
    num_warps = 4 if block_s * bhq * d <= TILE_ELEMENTS else 8
    key = (q.dtype, cos.dtype, q.device.index, bsz, seq, hq, hk, d, block_s, backward)
    _LAUNCH((bsz * n_seq_blocks,), key,
            (q, k, qo, ko, cos, sin, seq, n_seq_blocks, backward, hq, hk, bhq, bhk, d, block_s), num_warps,
            tensors=(q, k, qo, ko, cos, sin))
    return qo, ko


def position_tables(cos, sin, seq, d):
    """cos/sin as contiguous [seq, head_dim] (batch 1 positions shared by every batch row)."""
    c = cos.reshape(-1, seq, d)[0]
    s = sin.reshape(-1, seq, d)[0]
    return (c if c.is_contiguous() else c.contiguous()), (s if s.is_contiguous() else s.contiguous())


class RopeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, cos, sin):
        c, s = position_tables(cos, sin, q.shape[2], q.shape[3])
        ctx.save_for_backward(c, s)
        return launch(q, k, c, s, False)

    @staticmethod
    def backward(ctx, dq, dk):
        c, s = ctx.saved_tensors
        dqi, dki = launch(dq, dk, c, s, True)
        return dqi, dki, None, None


def rope(q, k, cos, sin):
    """(q', k') rotated by the Transformers-layout cos/sin tables [1, seq, head_dim]."""
    return RopeFunction.apply(q, k, cos, sin)
