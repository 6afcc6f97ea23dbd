"""The gated activation kernels: h = act(gate) * up forward, d gate and d up backward, element by element.

gate and up are read from one [tokens, 2I] product ([gate | up], row stride 2I) or from two [tokens, I]
tensors (row stride I). The activation's tanh is written through exp so the kernels also run under
Triton's interpreter.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import CachedLaunch
from kernels.engines.gated_mlp.settings import GLU_TILES

ACT_GELU_TANH = 0
ACT_SILU = 1


@triton.jit
def _tanh_via_exp(z):
    return 2.0 / (1.0 + tl.exp(-2.0 * z)) - 1.0


@triton.jit
def _act_and_grad(
    g,
    ACT: tl.constexpr,
):
    """(act(g), act'(g)) for ACT_GELU_TANH (0) or ACT_SILU (1)."""
    if ACT == 0:
        k0: tl.constexpr = 0.7978845608028654  # sqrt(2/pi)
        k1: tl.constexpr = 0.044715
        t = _tanh_via_exp(k0 * (g + k1 * g * g * g))
        a = 0.5 * g * (1.0 + t)
        da = 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * (k0 * (1.0 + 3.0 * k1 * g * g))
    else:
        sg = 1.0 / (1.0 + tl.exp(-g))
        a = g * sg
        da = sg * (1.0 + g * (1.0 - sg))
    return a, da


@triton.jit
def _glu_fwd_kernel(
    g_ptr,
    u_ptr,
    h_ptr,
    n_rows,
    inter,
    gu_stride,
    ACT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < inter)
    r64 = rows[:, None].to(tl.int64)
    g = tl.load(g_ptr + r64 * gu_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + r64 * gu_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    a, _ = _act_and_grad(g, ACT)
    tl.store(h_ptr + r64 * inter + cols[None, :], (a * u).to(h_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _glu_bwd_kernel(
    g_ptr,
    u_ptr,
    dh_ptr,
    dg_ptr,
    du_ptr,
    n_rows,
    inter,
    gu_stride,
    dgu_stride,
    ACT: tl.constexpr,
    WRITE_H: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Reads g, u, dh; writes d gate, d up and (WRITE_H) h over dh, element by element."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < inter)
    r64 = rows[:, None].to(tl.int64)
    off = r64 * inter + cols[None, :]
    g = tl.load(g_ptr + r64 * gu_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + r64 * gu_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dh = tl.load(dh_ptr + off, mask=mask, other=0.0).to(tl.float32)
    a, da = _act_and_grad(g, ACT)
    if WRITE_H:
        tl.store(dh_ptr + off, (a * u).to(dh_ptr.dtype.element_ty), mask=mask)
    tl.store(dg_ptr + r64 * dgu_stride + cols[None, :], (dh * u * da).to(dg_ptr.dtype.element_ty), mask=mask)
    tl.store(du_ptr + r64 * dgu_stride + cols[None, :], (dh * a).to(du_ptr.dtype.element_ty), mask=mask)


_FORWARD = CachedLaunch(_glu_fwd_kernel)
_BACKWARD = CachedLaunch(_glu_bwd_kernel)


def _grid(n_rows, inter):
    return (triton.cdiv(n_rows, GLU_TILES.rows_per_program), triton.cdiv(inter, GLU_TILES.columns_per_program))


def glu_forward(g: torch.Tensor, u: torch.Tensor, act: int) -> torch.Tensor:
    """h = act(g) * u; g and u are [N, I] with unit column stride and a shared row stride."""
    n_rows, inter = g.shape
    h = torch.empty((n_rows, inter), dtype=g.dtype, device=g.device)
    stride = g.stride(0)
    _FORWARD(_grid(n_rows, inter), (g.dtype, g.device.index, n_rows, inter, stride, act),
             (g, u, h, n_rows, inter, stride, act, GLU_TILES.rows_per_program, GLU_TILES.columns_per_program),
             GLU_TILES.warps, tensors=(g, u, h))
    return h


def glu_backward(g: torch.Tensor, u: torch.Tensor, dh: torch.Tensor, act: int, dg: torch.Tensor,
                 du: torch.Tensor, write_h: bool = True) -> None:
    """Writes d gate into dg, d up into du (both [N, I], shared row stride) and, if asked, h over dh."""
    n_rows, inter = dh.shape
    gs, ds = g.stride(0), dg.stride(0)
    _BACKWARD(_grid(n_rows, inter), (g.dtype, g.device.index, n_rows, inter, gs, ds, act, write_h),
              (g, u, dh, dg, du, n_rows, inter, gs, ds, act, write_h, GLU_TILES.rows_per_program,
               GLU_TILES.columns_per_program),
              GLU_TILES.warps, tensors=(g, u, dh, dg, du))
