"""Llama 4 rotary embedding as a Triton kernel and an autograd function.

q [batch, seq, q_heads, head_dim] and k [batch, seq, kv_heads, head_dim] are read as interleaved (real,
imaginary) pairs and multiplied by complex frequencies (``freqs_cis`` [1, seq, head_dim/2], complex64),
as Transformers' ``apply_rotary_emb`` does. The gradient of a rotation is the rotation by the conjugate,
so the backward launch is the forward's with the sine negated. One program rotates BLOCK_S rows
(batch * seq positions) of q and of k, loading each position's cos/sin once for all heads; whole rows
are loaded as contiguous tiles and split into (real, imaginary) in registers, so loads and stores stay
wide.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import CachedLaunch

# As many positions a program (at most MAX_POSITIONS) as keep its q tile within TILE_ELEMENTS, and 8 warps
# instead of 4 where one position's heads alone exceed it. Set from the first GPU rerun
# (h200-2026-12-02.jsonl.gz), not swept since: the kernel runs at 95% of copy bandwidth at its largest size.
MAX_POSITIONS = 32
TILE_ELEMENTS = 4096


@triton.jit
def _rotate_tile(
    x_ptr,
    o_ptr,
    rows,
    row_ok,
    c,
    s,
    H: tl.constexpr,
    BH: tl.constexpr,
    D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    h = tl.arange(0, BH)
    d = tl.arange(0, D)
    off = rows[:, None, None].to(tl.int64) * (H * D) + h[None, :, None] * D + d[None, None, :]
    mask = row_ok[:, None, None] & (h[None, :, None] < H)
    x = tl.load(x_ptr + off, mask=mask, other=0.0).to(tl.float32)
    xr, xi = tl.split(tl.reshape(x, (BLOCK_S, BH, D // 2, 2)))
    cb = c[:, None, :]
    sb = s[:, None, :]
    yr = xr * cb - xi * sb
    yi = xr * sb + xi * cb
    y = tl.reshape(tl.join(yr, yi), (BLOCK_S, BH, D))
    tl.store(o_ptr + off, y.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _llama4_rope_kernel(
    q_ptr,
    k_ptr,
    qo_ptr,
    ko_ptr,
    f_ptr,
    n_rows,
    f_rows,
    sign,
    HQ: tl.constexpr,
    HK: tl.constexpr,
    BHQ: tl.constexpr,
    BHK: tl.constexpr,
    D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_S + tl.arange(0, BLOCK_S)
    row_ok = rows < n_rows
    pos = rows % f_rows
    fd = tl.arange(0, D)
    f = tl.load(f_ptr + pos[:, None] * D + fd[None, :], mask=row_ok[:, None], other=0.0)
    c, s = tl.split(tl.reshape(f, (BLOCK_S, D // 2, 2)))
    s = s * sign
    _rotate_tile(q_ptr, qo_ptr, rows, row_ok, c, s, HQ, BHQ, D, BLOCK_S)
    _rotate_tile(k_ptr, ko_ptr, rows, row_ok, c, s, HK, BHK, D, BLOCK_S)


_LAUNCH = CachedLaunch(_llama4_rope_kernel)


def _tiles(hq: int, d: int) -> tuple[int, int]:
    """(positions a program, warps)."""
    per_row = triton.next_power_of_2(hq) * d
    block_s = max(1, min(MAX_POSITIONS, TILE_ELEMENTS // per_row))
    num_warps = 4 if block_s * per_row <= TILE_ELEMENTS else 8
    return block_s, num_warps


def launch(q, k, f_real, sign: float):
    """(q', k'): q and k rotated by ``f_real`` ([positions, head_dim] float32 (cos, sin) pairs), the sine
    times ``sign`` (1 forward, -1 for the gradient)."""
    b, s, hq, d = q.shape
    hk = k.shape[2]
    if d & (d - 1):
        raise ValueError(f"head_dim must be a power of two, got {d}")
    q = q if q.is_contiguous() else q.contiguous()
    k = k if k.is_contiguous() else k.contiguous()
    qo = torch.empty_like(q)
    ko = torch.empty_like(k)
    n_rows = b * s
    block_s, num_warps = _tiles(hq, d)
    grid = (triton.cdiv(n_rows, block_s),)
    bhq, bhk = triton.next_power_of_2(hq), triton.next_power_of_2(hk)
    f_rows = f_real.shape[0]
    key = (q.dtype, q.device.index, n_rows, f_rows, hq, hk, d, block_s, num_warps)
    _LAUNCH(grid, key, (q, k, qo, ko, f_real, n_rows, f_rows, sign, hq, hk, bhq, bhk, d, block_s), num_warps,
            tensors=(q, k, qo, ko, f_real))
    return qo, ko


def freqs_real(freqs_cis: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Complex frequencies as contiguous float32 [positions, head_dim] (cos, sin) pairs."""
    f = freqs_cis.reshape(-1, head_dim // 2)
    if f.is_complex():
        f = torch.view_as_real(f)
    return f.to(torch.float32).reshape(-1, head_dim).contiguous()


class Llama4RopeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, freqs_cis):
        f = freqs_real(freqs_cis, q.shape[-1])
        ctx.save_for_backward(f)
        return launch(q, k, f, 1.0)

    @staticmethod
    def backward(ctx, dq, dk):
        (f,) = ctx.saved_tensors
        dqi, dki = launch(dq, dk, f, -1.0)
        return dqi, dki, None


def llama4_rope(q, k, freqs_cis):
    return Llama4RopeFunction.apply(q, k, freqs_cis)
