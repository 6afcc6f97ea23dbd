"""Llama 4 rotary embedding: inputs, references, providers and KernelIndex's own Triton kernel.

q [batch, seq, q_heads, head_dim] and k [batch, seq, kv_heads, head_dim] are read as interleaved
(real, imaginary) pairs and multiplied by complex frequencies ``freqs_cis`` [1, seq, head_dim/2]
(complex64), as Transformers' ``apply_rotary_emb`` does. The gradient of a rotation is the rotation
by the conjugate, so the backward kernel is the forward kernel with the sine negated.
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

KERNEL = "llama4_rope"
GRAD_INPUTS = ("q", "k")
OUTPUT_NAMES = ("q", "k")
PROVIDERS = ("kernelindex", "liger", "huggingface")
ROPE_THETA = 500000.0
REFERENCE_DTYPE = torch.float64


def _shapes(params):
    return {t["name"]: t["shape"] for t in kernels.lookup(KERNEL).input_tensors(params, None)}


def freqs_cis_for(seq: int, head_dim: int, device, theta: float = ROPE_THETA) -> torch.Tensor:
    """Complex frequencies [1, seq, head_dim/2] as Llama 4's text rotary embedding builds them (no scaling)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    pos = torch.arange(seq, device=device, dtype=torch.float32)
    angles = torch.outer(pos, inv_freq)
    return torch.polar(torch.ones_like(angles), angles).unsqueeze(0)


def make_inputs(params: dict, dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
    shapes = _shapes(params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    q = randn(shapes["q"], td, gen, device)
    k = randn(shapes["k"], td, gen, device)
    return {"q": q, "k": k, "freqs_cis": freqs_cis_for(shapes["q"][1], shapes["q"][3], device)}


def reference(inputs: dict, params: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Complex multiply in the inputs' precision (the comparator upcasts to float64 / complex128)."""
    q, k, f = inputs["q"], inputs["k"], inputs["freqs_cis"]
    f = f.reshape(1, q.shape[1], 1, q.shape[-1] // 2)

    def rot(x):
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(xc * f).flatten(3)

    return rot(q), rot(k)


# --------------------------------------------------------------------------------------------------
# KernelIndex Triton kernel: one program rotates BLOCK_S rows (batch*seq positions) of q and of k,
# loading each position's cos/sin once for all heads; whole rows are loaded as contiguous tiles and
# split into (real, imaginary) in registers, so loads and stores stay wide.


@triton.jit
def _rotate_tile(x_ptr, o_ptr, rows, row_ok, c, s, H: tl.constexpr, BH: tl.constexpr, D: tl.constexpr,
                 BLOCK_S: tl.constexpr):
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
def _llama4_rope_kernel(q_ptr, k_ptr, qo_ptr, ko_ptr, f_ptr, n_rows, f_rows, sign,
                        HQ: tl.constexpr, HK: tl.constexpr, BHQ: tl.constexpr, BHK: tl.constexpr,
                        D: tl.constexpr, BLOCK_S: tl.constexpr):
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


def _meta(hq: int, d: int):
    bhq = triton.next_power_of_2(hq)
    per_row = bhq * d
    block_s = max(1, min(32, 4096 // per_row))
    num_warps = 4 if block_s * per_row <= 4096 else 8
    return block_s, num_warps


def _launch(q, k, f_real, sign: float):
    b, s, hq, d = q.shape
    hk = k.shape[2]
    if d & (d - 1):
        raise ValueError(f"head_dim must be a power of two, got {d}")
    q = q if q.is_contiguous() else q.contiguous()
    k = k if k.is_contiguous() else k.contiguous()
    qo = torch.empty_like(q)
    ko = torch.empty_like(k)
    n_rows = b * s
    block_s, num_warps = _meta(hq, d)
    grid = (triton.cdiv(n_rows, block_s),)
    bhq, bhk = triton.next_power_of_2(hq), triton.next_power_of_2(hk)
    f_rows = f_real.shape[0]
    key = (q.dtype, q.device.index, n_rows, f_rows, hq, hk, d, block_s, num_warps)
    _LAUNCH(grid, key, (q, k, qo, ko, f_real, n_rows, f_rows, sign, hq, hk, bhq, bhk, d, block_s), num_warps,
            tensors=(q, k, qo, ko, f_real))
    return qo, ko


def _freqs_real(freqs_cis: torch.Tensor, head_dim: int) -> torch.Tensor:
    f = freqs_cis.reshape(-1, head_dim // 2)
    if f.is_complex():
        f = torch.view_as_real(f)
    return f.to(torch.float32).reshape(-1, head_dim).contiguous()


class KernelIndexLlama4Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, freqs_cis):
        f = _freqs_real(freqs_cis, q.shape[-1])
        ctx.save_for_backward(f)
        return _launch(q, k, f, 1.0)

    @staticmethod
    def backward(ctx, dq, dk):
        (f,) = ctx.saved_tensors
        dqi, dki = _launch(dq, dk, f, -1.0)
        return dqi, dki, None


def kernelindex_llama4_rope(q, k, freqs_cis):
    return KernelIndexLlama4Rope.apply(q, k, freqs_cis)


def _torch_apply_rotary_emb(xq, xk, freqs_cis):
    """PyTorch equivalent of Transformers' Llama 4 ``apply_rotary_emb``."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis[:, :, None, :]).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis[:, :, None, :]).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def build(provider: str, inputs: dict, params: dict | None = None) -> Built:
    leaves = leaf_copies(inputs, GRAD_INPUTS)
    q, k = leaves["q"], leaves["k"]
    f = inputs["freqs_cis"]
    if provider == "kernelindex":
        return Built(lambda: kernelindex_llama4_rope(q, k, f), leaves, "KernelIndex Triton llama4 RoPE (fwd+bwd)",
                     OUTPUT_NAMES)
    if provider == "liger":
        liger_llama4_text_rotary_pos_emb = liger_attr(q, "llama4_rope", "liger_llama4_text_rotary_pos_emb")
        return Built(lambda: liger_llama4_text_rotary_pos_emb(q, k, f), leaves,
                     f"Liger-Kernel {package_version('liger-kernel')} liger_llama4_text_rotary_pos_emb", OUTPUT_NAMES)
    if provider == "huggingface":
        try:
            from transformers.models.llama4.modeling_llama4 import apply_rotary_emb
            label = f"Transformers {package_version('transformers')} llama4 apply_rotary_emb"
        except Exception:  # noqa: BLE001
            apply_rotary_emb = _torch_apply_rotary_emb
            label = "PyTorch equivalent of Transformers llama4 apply_rotary_emb"
        return Built(lambda: apply_rotary_emb(q, k, f), leaves, label, OUTPUT_NAMES)
    if provider == "torch":
        return Built(lambda: _torch_apply_rotary_emb(q, k, f), leaves, "PyTorch complex multiply (eager)", OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def _tensor_bytes(params, dtype):
    shapes = _shapes(params)
    e = BYTES_PER_ELEMENT[dtype]
    qb, kb = numel(shapes["q"]) * e, numel(shapes["k"]) * e
    fb = shapes["q"][1] * shapes["q"][3] // 2 * BYTES_PER_ELEMENT["complex64"]
    return qb, kb, fb


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read q, k, freqs; write q', k'. Backward: read dq', dk', freqs; write dq, dk.
    Full: every distinct input once (q, k, freqs, dq', dk') and every output once (q', k', dq, dk)."""
    qb, kb, fb = _tensor_bytes(params, dtype)
    one = 2 * (qb + kb) + fb
    if mode in ("forward", "backward"):
        return one
    if mode == "full":
        return 2 * one - fb
    raise ValueError(mode)


def flops(params, mode) -> int:
    """A complex multiply is 6 real operations per pair (4 mul + 2 add)."""
    shapes = _shapes(params)
    pairs = (numel(shapes["q"]) + numel(shapes["k"])) // 2
    one = 6 * pairs
    return {"forward": one, "backward": one, "full": 2 * one}[mode]
