"""RMSNorm over the last dimension: inputs, references, providers, KernelIndex's Triton kernels.

The Triton code here also serves LayerNorm (``kernels.layer_norm.impl``, ``IS_LN=True``). Forward: one
program normalizes BLOCK_M whole rows (or one row in two sweeps of column chunks) and saves mean/rstd
(float32, one per row). Backward: a fixed number of programs (a small multiple of the SM count) each
walk a contiguous set of rows, write dx, and keep the weight (and bias) gradient partial sums in
registers (or, optionally, in the program's own row of the partials buffer); optionally the next row's
x and dy (or x alone) are loaded before the current row's reductions (software prefetch), or the row
loop is pipelined; wide rows may be split in column slices over several programs, whose loads may be
TMA tiles. One more launch sums the partials over programs into dw (and db), or, where all programs fit
on the GPU at once, the same programs do after a grid barrier. Launch settings per row length are in
FWD_CONFIG / BWD_CONFIG.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

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

KERNEL = "rms_norm"
GRAD_INPUTS = ("x", "weight")
OUTPUT_NAMES = ("y",)
PROVIDERS = ("kernelindex", "liger", "huggingface")
REFERENCE_DTYPE = torch.float64
DEFAULT_EPS = 1e-6


def _shapes(kernel, params):
    return {t["name"]: t["shape"] for t in kernels.lookup(kernel).input_tensors(params, None)}


def make_inputs(params: dict, dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
    s = _shapes(KERNEL, params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    return {"x": randn(s["x"], td, gen, device), "weight": randn(s["weight"], td, gen, device, scale=0.1, shift=1.0)}


def _eps(params) -> float:
    return float(params.get("eps", DEFAULT_EPS))


def reference(inputs: dict, params: dict | None = None):
    eps = _eps(params or {})
    x, w = inputs["x"], inputs["weight"]
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w,)


# --------------------------------------------------------------------------------------------------


@triton.jit
def _norm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps,
                     IS_LN: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, X_EVICT: tl.constexpr,
                     Y_CACHE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    mask = (rows[:, None] < n_rows) & col_ok[None, :]
    off = rows[:, None].to(tl.int64) * n_cols + cols[None, :]
    # The parameters are loaded first: their (cache-hit) loads then never wait behind the row's reductions.
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    if IS_LN:
        b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + off, mask=mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
    if IS_LN:
        mean = tl.sum(x, axis=1) / n_cols
        xc = tl.where(mask, x - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=1) / n_cols + eps)
        y = xc * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(mean_ptr + rows, mean, mask=rows < n_rows)
    else:
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        y = x * rstd[:, None] * w[None, :]
    tl.store(rstd_ptr + rows, rstd, mask=rows < n_rows)
    tl.store(y_ptr + off, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=Y_CACHE)


@triton.jit
def _row_load(ptrs, col_ok, EVEN: tl.constexpr, EVICT: tl.constexpr):
    """A row (or w, b) as float32; ``EVEN``: the row fills the tile, so no mask (masks cost registers)."""
    if EVEN:
        v = tl.load(ptrs, eviction_policy=EVICT)
    else:
        v = tl.load(ptrs, mask=col_ok, other=0.0, eviction_policy=EVICT)
    return v.to(tl.float32)


@triton.jit
def _row_store(ptrs, v, col_ok, EVEN: tl.constexpr, CACHE: tl.constexpr):
    """``_row_load``'s counterpart: a store masked unless ``EVEN``."""
    if EVEN:
        tl.store(ptrs, v, cache_modifier=CACHE)
    else:
        tl.store(ptrs, v, mask=col_ok, cache_modifier=CACHE)


@triton.jit
def _norm_fwd_row_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_cols, eps, IS_LN: tl.constexpr,
                         BLOCK_N: tl.constexpr, X_EVICT: tl.constexpr, Y_CACHE: tl.constexpr,
                         LATE_PARAMS: tl.constexpr, EVEN: tl.constexpr):
    """One row per program as a 1-D tile (wide rows): the compiler spreads the row over every warp.
    ``LATE_PARAMS``: w and b are loaded after the statistics, so only x is held across the reductions (with
    a register cap, more rows fit on an SM); else before x. ``EVEN``: n_cols == BLOCK_N."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    if not LATE_PARAMS:
        w = _row_load(w_ptr + cols, col_ok, EVEN, "")
        if IS_LN:
            b = _row_load(b_ptr + cols, col_ok, EVEN, "")
    x = _row_load(x_ptr + row * n_cols + cols, col_ok, EVEN, X_EVICT)
    if IS_LN:
        mean = tl.sum(x, axis=0) / n_cols
        if EVEN:
            x = x - mean
        else:
            x = tl.where(col_ok, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(mean_ptr + row, mean)
    else:
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    if LATE_PARAMS:
        w = _row_load(w_ptr + cols, col_ok, EVEN, "")
        if IS_LN:
            b = _row_load(b_ptr + cols, col_ok, EVEN, "")
    y = x * rstd * w
    if IS_LN:
        y += b
    _row_store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), col_ok, EVEN, Y_CACHE)


@triton.jit
def _norm_fwd_chunked_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_cols, eps, IS_LN: tl.constexpr,
                             CHUNK: tl.constexpr):
    """One row per program in two sweeps of CHUNK columns (n_cols a multiple of CHUNK): the first folds the
    chunks' statistics together (LayerNorm: each chunk's mean and squared deviations, merged as in Chan et
    al.'s parallel variance), the second reads the row again (from L2) and writes y. A program holds one
    chunk in registers, not the row, so more rows are in flight per SM than with the row held. The sweeps
    are not pipelined (chunks staged in shared memory were slower: v13 notes)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    lanes = tl.arange(0, CHUNK)
    mean = 0.0
    m2 = 0.0  # the sum of squares about the mean (LayerNorm) or about 0 (RMSNorm) of the chunks so far
    for c in tl.range(0, n_cols // CHUNK, num_stages=1):
        xc = tl.load(x_row + c * CHUNK + lanes, eviction_policy="evict_last").to(tl.float32)
        if IS_LN:
            c_mean = tl.sum(xc) / CHUNK
            d = xc - c_mean
            delta = c_mean - mean
            mean += delta / (c + 1)
            m2 += tl.sum(d * d) + delta * delta * CHUNK * c / (c + 1)
        else:
            m2 += tl.sum(xc * xc)
    rstd = 1.0 / tl.sqrt(m2 / n_cols + eps)
    if IS_LN:
        tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for c in tl.range(0, n_cols // CHUNK, num_stages=1):
        cols = c * CHUNK + lanes
        xc = tl.load(x_row + cols, eviction_policy="evict_first").to(tl.float32)
        y = (xc - mean) * rstd * tl.load(w_ptr + cols).to(tl.float32)
        if IS_LN:
            y += tl.load(b_ptr + cols).to(tl.float32)
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), cache_modifier=".cs")


@triton.jit
def _norm_dx(xhat, wdy, rstd, s1, s2, n_cols, IS_LN: tl.constexpr):
    """dx of one row (or slice) from xhat and w * dy; ``s1``, ``s2``: the row's sums of xhat * w * dy and
    w * dy over the columns outside this tile (0 when the tile is the whole row)."""
    c1 = (s1 + tl.sum(xhat * wdy)) / n_cols
    if IS_LN:
        c2 = (s2 + tl.sum(wdy)) / n_cols
        dx = (wdy - (xhat * c1 + c2)) * rstd
    else:
        dx = (wdy - xhat * c1) * rstd
    return dx


@triton.jit
def _norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, grads_ptr,
                     sync_ptr, n_rows, n_cols, rows_per_prog, n_groups, IS_LN: tl.constexpr, BLOCK_N: tl.constexpr,
                     RELOAD_W: tl.constexpr, ACC_IN_GLOBAL: tl.constexpr, PREFETCH: tl.constexpr,
                     STAGES: tl.constexpr, FUSED_SUM: tl.constexpr, SUM_G: tl.constexpr, SUM_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    if not RELOAD_W:
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    dw_acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db_acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    row0 = pid * rows_per_prog
    row_end = tl.minimum(row0 + rows_per_prog, n_rows)
    p_off = pid * n_cols + cols
    if PREFETCH > 0:
        # Software pipelining: the next row's x (PREFETCH 1) or x and dy (PREFETCH 2) are loaded, in their
        # storage dtype, before this row's reductions, so the program keeps loads in flight while it computes.
        off0 = row0.to(tl.int64) * n_cols + cols
        ok0 = cols < tl.where(row0 < row_end, n_cols, 0)
        x_nxt = tl.load(x_ptr + off0, mask=ok0, other=0.0)
        if PREFETCH > 1:
            dy_nxt = tl.load(dy_ptr + off0, mask=ok0, other=0.0)
    for i in tl.range(0, row_end - row0, num_stages=STAGES):
        row = row0 + i
        off = row.to(tl.int64) * n_cols + cols
        ok_n = cols < tl.where(row + 1 < row_end, n_cols, 0)
        if PREFETCH > 0:
            x = x_nxt.to(tl.float32)
            x_nxt = tl.load(x_ptr + off + n_cols, mask=ok_n, other=0.0)
        else:
            x = tl.load(x_ptr + off, mask=col_ok, other=0.0).to(tl.float32)
        if PREFETCH > 1:
            dy = dy_nxt.to(tl.float32)
            dy_nxt = tl.load(dy_ptr + off + n_cols, mask=ok_n, other=0.0)
        else:
            dy = tl.load(dy_ptr + off, mask=col_ok, other=0.0).to(tl.float32)
        mean, rstd = _row_stats(mean_ptr, rstd_ptr, row, IS_LN)
        if RELOAD_W:  # wide rows: re-read w (cache-resident) rather than hold it in registers
            w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
        if IS_LN:
            xhat = tl.where(col_ok, (x - mean) * rstd, 0.0)
        else:
            xhat = x * rstd
        dx = _norm_dx(xhat, w * dy, rstd, 0.0, 0.0, n_cols, IS_LN)
        tl.store(dx_ptr + off, dx.to(dx_ptr.dtype.element_ty), mask=col_ok)
        if ACC_IN_GLOBAL:
            # Wide rows: the partial sums live in this program's own (cache-resident) row of the
            # partials buffer instead of registers, which would spill.
            if i == 0:
                tl.store(dw_part_ptr + p_off, dy * xhat, mask=col_ok)
                if IS_LN:
                    tl.store(db_part_ptr + p_off, dy, mask=col_ok)
            else:
                tl.store(dw_part_ptr + p_off, tl.load(dw_part_ptr + p_off, mask=col_ok, other=0.0) + dy * xhat,
                         mask=col_ok)
                if IS_LN:
                    tl.store(db_part_ptr + p_off, tl.load(db_part_ptr + p_off, mask=col_ok, other=0.0) + dy,
                             mask=col_ok)
        else:
            dw_acc += dy * xhat
            if IS_LN:
                db_acc += dy
    if not ACC_IN_GLOBAL:
        tl.store(dw_part_ptr + p_off, dw_acc, mask=col_ok)
        if IS_LN:
            tl.store(db_part_ptr + p_off, db_acc, mask=col_ok)
    if FUSED_SUM:
        _sum_partials_after_all(dw_part_ptr, db_part_ptr, grads_ptr, sync_ptr, n_groups, n_cols, IS_LN, SUM_G, SUM_N)


@triton.jit
def _row_stats(mean_ptr, rstd_ptr, row, IS_LN: tl.constexpr):
    """A row's saved (mean, rstd) from the forward; the mean is 0 for RMSNorm."""
    rstd = tl.load(rstd_ptr + row)
    if IS_LN:
        mean = tl.load(mean_ptr + row)
    else:
        mean = 0.0
    return mean, rstd


@triton.jit
def _slice_of_row(src, base, row, part, cols, ok, SLICE: tl.constexpr, N_SLICES: tl.constexpr,
                  TMA_LINE: tl.constexpr):
    """Slice ``part`` of a row of x or dy as float32: one [SLICE // TMA_LINE, TMA_LINE] TMA tile where
    TMA_LINE > 0 (``src`` a descriptor over lines of TMA_LINE columns), else a masked load at ``cols``."""
    if TMA_LINE:
        lines: tl.constexpr = SLICE // TMA_LINE
        v = src.load([row * (lines * N_SLICES) + part * lines, 0])
    else:
        v = tl.load(src + base + cols, mask=ok, other=0.0)
    return v.to(tl.float32)


@triton.jit
def _norm_bwd_sliced_kernel(dy_src, x_src, dx_ptr, w_ptr, mean_ptr, rstd_ptr, dw_part_ptr, db_part_ptr, grads_ptr,
                            sync_ptr, n_rows, n_cols, rows_per_prog, n_groups, IS_LN: tl.constexpr,
                            SLICE: tl.constexpr, N_SLICES: tl.constexpr, TMA_LINE: tl.constexpr,
                            RELOAD_W: tl.constexpr, HOLD_OTHER_W: tl.constexpr, STAGES: tl.constexpr,
                            FUSED_SUM: tl.constexpr, SUM_G: tl.constexpr, SUM_N: tl.constexpr):
    """Wide rows split over N_SLICES programs that walk the same rows side by side, each owning one column
    slice: its dx and its slice of the dW (dB) partial sums, so each holds 1/N_SLICES of the registers a
    whole row needs. A row's sums run over every slice, so each program also reads the other slices (sums
    only, before its own): its partners read the same bytes at about the same time, so L2 serves the
    repeats and HBM still sees each element once. STAGES > 1 lets the compiler pipeline the row loop.
    HOLD_OTHER_W (two slices): the other slice's w is loaded once too, not with every row.
    TMA_LINE > 0: x and dy come as TMA tiles (``dy_src``, ``x_src`` descriptors; rows that fill the
    tiles, so no masks): the loads land in shared memory, so the pipelined loop keeps the next rows'
    slices in flight, in any dtype and without holding them in registers, while this row computes. dx
    leaves by plain stores either way (TMA stores, through shared memory, measured slower: v11 notes)."""
    EVEN: tl.constexpr = TMA_LINE > 0
    pid = tl.program_id(0)
    group = pid // N_SLICES
    part = pid % N_SLICES
    if EVEN:
        lanes = tl.arange(0, SLICE // TMA_LINE)[:, None] * TMA_LINE + tl.arange(0, TMA_LINE)[None, :]
    else:
        lanes = tl.arange(0, SLICE)
    cols = part * SLICE + lanes
    col_ok = cols < n_cols
    if not RELOAD_W:
        w = _row_load(w_ptr + cols, col_ok, EVEN, "")
    if HOLD_OTHER_W:
        tl.static_assert(N_SLICES == 2)
        o_cols = (1 - part) * SLICE + lanes
        w_other = _row_load(w_ptr + o_cols, o_cols < n_cols, EVEN, "")
    dw_acc = tl.zeros(lanes.shape, dtype=tl.float32)
    db_acc = tl.zeros(lanes.shape, dtype=tl.float32)
    row0 = group * rows_per_prog
    row_end = tl.minimum(row0 + rows_per_prog, n_rows)
    for i in tl.range(0, row_end - row0, num_stages=STAGES):
        row = row0 + i
        base = row.to(tl.int64) * n_cols
        mean, rstd = _row_stats(mean_ptr, rstd_ptr, row, IS_LN)
        s1 = 0.0
        s2 = 0.0
        for t in tl.static_range(1, N_SLICES):
            other = (part + t) % N_SLICES
            o_cols = other * SLICE + lanes
            o_ok = o_cols < n_cols
            xo = _slice_of_row(x_src, base, row, other, o_cols, o_ok, SLICE, N_SLICES, TMA_LINE)
            if not HOLD_OTHER_W:
                w_other = _row_load(w_ptr + o_cols, o_ok, EVEN, "")
            wdy_o = w_other * _slice_of_row(dy_src, base, row, other, o_cols, o_ok, SLICE, N_SLICES, TMA_LINE)
            xhat_o = (xo - mean) * rstd
            if not EVEN:
                xhat_o = tl.where(o_ok, xhat_o, 0.0)
            s1 += tl.sum(xhat_o * wdy_o)
            s2 += tl.sum(wdy_o)
        x = _slice_of_row(x_src, base, row, part, cols, col_ok, SLICE, N_SLICES, TMA_LINE)
        dy = _slice_of_row(dy_src, base, row, part, cols, col_ok, SLICE, N_SLICES, TMA_LINE)
        if RELOAD_W:
            w = _row_load(w_ptr + cols, col_ok, EVEN, "")
        xhat = (x - mean) * rstd
        if not EVEN:
            xhat = tl.where(col_ok, xhat, 0.0)
        dx = _norm_dx(xhat, w * dy, rstd, s1, s2, n_cols, IS_LN).to(dx_ptr.dtype.element_ty)
        _row_store(dx_ptr + base + cols, dx, col_ok, EVEN, "")
        dw_acc += dy * xhat
        if IS_LN:
            db_acc += dy
    p_off = group * n_cols + cols
    _row_store(dw_part_ptr + p_off, dw_acc, col_ok, EVEN, "")
    if IS_LN:
        _row_store(db_part_ptr + p_off, db_acc, col_ok, EVEN, "")
    if FUSED_SUM:
        _sum_partials_after_all(dw_part_ptr, db_part_ptr, grads_ptr, sync_ptr, n_groups, n_cols, IS_LN, SUM_G, SUM_N)


@triton.jit
def _column_sums(part_ptr, out_ptr, n_groups, n_cols, cols, BLOCK_G: tl.constexpr):
    """out[cols] = the sum over groups of part[g, cols], in float32, stored in out's dtype."""
    col_ok = cols < n_cols
    groups = tl.arange(0, BLOCK_G)
    acc = tl.zeros(cols.shape, dtype=tl.float32)
    for g0 in range(0, n_groups, BLOCK_G):
        g = g0 + groups
        tile = tl.load(part_ptr + g[:, None] * n_cols + cols[None, :], mask=(g[:, None] < n_groups) & col_ok[None, :],
                       other=0.0, cache_modifier=".cg")
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc.to(out_ptr.dtype.element_ty), mask=col_ok)


@triton.jit
def _sum_partials_kernel(part_ptr, out_ptr, n_groups, n_cols, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[k, c] = sum over g of part[k, g, c]: the weight (and bias) gradients from the backward's
    per-program partial sums, in one launch."""
    k = tl.program_id(1)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    _column_sums(part_ptr + k.to(tl.int64) * n_groups * n_cols, out_ptr + k * n_cols, n_groups, n_cols, cols, BLOCK_G)


@triton.jit
def _grid_sync(sync_ptr, n_progs):
    """Wait until every program of the launch has arrived (all must be resident at once). ``sync_ptr``:
    [arrivals, generation], int32; the last to arrive resets the arrivals and moves the generation on,
    so the same two words serve every launch."""
    tl.debug_barrier()  # every thread's stores before this program's arrival
    generation = tl.atomic_add(sync_ptr + 1, 0, sem="acquire")
    if tl.atomic_add(sync_ptr, 1, sem="acq_rel") == n_progs - 1:
        tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
        tl.atomic_add(sync_ptr + 1, 1, sem="release")
    else:
        while tl.atomic_add(sync_ptr + 1, 0, sem="acquire") == generation:
            pass
    tl.debug_barrier()


@triton.jit
def _sum_partials_after_all(dw_part_ptr, db_part_ptr, grads_ptr, sync_ptr, n_groups, n_cols, IS_LN: tl.constexpr,
                            SUM_G: tl.constexpr, SUM_N: tl.constexpr):
    """The backward's epilogue instead of the _sum_partials_kernel launch: once every program has stored its
    partial sums, each sums SUM_N columns of them over the groups into the weight (and bias) gradients."""
    _grid_sync(sync_ptr, tl.num_programs(0))
    cols = tl.program_id(0) * SUM_N + tl.arange(0, SUM_N)
    _column_sums(dw_part_ptr, grads_ptr, n_groups, n_cols, cols, SUM_G)
    if IS_LN:
        _column_sums(db_part_ptr, grads_ptr + n_cols, n_groups, n_cols, cols, SUM_G)


_FWD = CachedLaunch(_norm_fwd_kernel)
_FWD_ROW = CachedLaunch(_norm_fwd_row_kernel)
_FWD_CHUNKED = CachedLaunch(_norm_fwd_chunked_kernel)
_BWD = CachedLaunch(_norm_bwd_kernel)
_BWD_SLICED = CachedLaunch(_norm_bwd_sliced_kernel)
_SUM_PARTIALS = CachedLaunch(_sum_partials_kernel)
_SUM_GROUPS, _SUM_COLS = 64, 128  # partials tile of one _sum_partials_kernel step: groups x columns

# Launch settings, keyed by (is_ln, padded row length); a missing key falls back to the rules in
# _fwd_meta / _bwd_meta. Forward (``row_tiles``): rows per program, num_warps, the 1-D one-row kernel,
# streaming cache hints; one program per tile (a persistent grid walking the tiles with a pipelined loop
# was no faster, and the loop alone made one-tile programs 9-33% slower at 16384: docs/rerun-notes.md v7);
# or (``row_chunks``) one row in two sweeps of chunks (RMSNorm 4096 13.8 -> 12.2 us, v13); ``late_params``
# with ``max_regs``: only x held across the statistics, so that a register cap fits two fp32 rows of 16384
# on an SM instead of one (LayerNorm 16384 143.5 -> 136.6 us, v15). LayerNorm 4096: two rows a program,
# about 0.9% faster than one in two sessions' A/Bs (v13, v16), under the sweep's 1.5% bar but consistent.
# Backward (``whole_row``): programs per SM, num_warps, partial sums in global memory, re-read w per row,
# prefetch the next row (x, or x and dy) in registers, pipeline depth (``tl.range`` num_stages: compiled by
# Triton 3.6 for sm_90 with the 16-byte alignment hints a launch gets, the next rows' loads, bf16 or fp32,
# go through shared memory while this row computes); or (``sliced_rows``) each row's columns split
# over programs walking the same rows (at 16384 a whole row's fp32 dW/dB partials leave no registers for
# the next rows' loads: two slices took LayerNorm from 355-366 to 270 us, v8, and, with 3 stages,
# RMSNorm from 85 to 71 us, v9), their loads optionally as TMA tiles (``tma``, whole rows when one slice:
# LayerNorm 16384 267 -> 252 us, RMSNorm 4096 27.5 -> 23.9 us, RMSNorm / LayerNorm 1024 17.0 / 32.7 ->
# 14.8 / 24.9 us, v11); ``fused_sum`` sums the partials in the same launch behind a grid barrier
# (RMSNorm 1024 / 4096 and LayerNorm 4096 backward 16% / 7% / 5% faster, v10); ``hold_other_w`` keeps the
# other slice's w in registers, so no stage holds w and a fourth stage fits (RMSNorm 16384 71.5 -> 65.9
# us, LayerNorm 16384 253.1 -> 246.9 us, v14). The entries are the fastest
# of a per-size sweep on one H200 (bf16 RMSNorm at 2048 rows, fp32 LayerNorm at 4096 rows;
# ``python -m kernelindex_pipeline.gpu.tune``, see docs/rerun-notes.md).

def row_tiles(rows, num_warps, one_row=False, stream=False, late_params=False, max_regs=None) -> dict:
    """``stream``: cache hints for data touched once (x loaded evict-first, y stored streaming).
    ``late_params`` (one row, the 1-D kernel): w and b loaded after the row's statistics; ``max_regs``: a
    register cap per thread, so that more programs fit on an SM."""
    one_row = (one_row or late_params) and rows == 1
    return {"rows": rows, "num_warps": num_warps, "one_row": one_row, "stream": stream,
            "late_params": late_params and one_row, "max_regs": max_regs}


def row_chunks(chunk, num_warps) -> dict:
    """One row per program in two sweeps of ``chunk`` columns (``_norm_fwd_chunked_kernel``) where the row
    length is a multiple of ``chunk``; else the 1-D one-row kernel."""
    return {"chunk": chunk, "num_warps": num_warps}


def whole_row(per_sm, num_warps, acc_in_global=False, reload_w=False, prefetch=False, stages=1,
              fused_sum=False) -> dict:
    """``prefetch``: False, "x" (the next row's x) or True (the next row's x and dy). ``fused_sum``: the
    programs sum the partials themselves after a grid-wide barrier instead of a second launch (only where
    every program can be resident at once: at most one per SM; else the second launch)."""
    return {"per_sm": per_sm, "num_warps": num_warps, "acc_in_global": acc_in_global, "reload_w": reload_w,
            "prefetch": prefetch, "stages": stages, "fused_sum": fused_sum}


def sliced_rows(per_sm, num_warps, slices, reload_w=False, stages=1, fused_sum=False, tma=False,
                hold_other_w=False) -> dict:
    """Each row's columns split over ``slices`` programs walking the same rows (``_norm_bwd_sliced_kernel``;
    one slice: whole rows); ``per_sm`` counts programs, so ``per_sm / slices`` row groups per SM; ``stages``,
    ``fused_sum``: as in ``whole_row``; ``tma``: x and dy loaded as TMA tiles where rows allow
    (``_tma_lines``); ``hold_other_w`` (two slices): the other slice's w held in registers too. (The next
    row prefetched in registers, as in ``whole_row``, and the other slices read in smaller pieces were
    slower here: v8 and v10 notes.)"""
    return {"per_sm": per_sm, "num_warps": num_warps, "slices": slices, "reload_w": reload_w, "stages": stages,
            "fused_sum": fused_sum, "tma": tma, "hold_other_w": hold_other_w}


FWD_CONFIG: dict = {
    (False, 1024): row_tiles(2, 4), (False, 4096): row_chunks(2048, 4), (False, 16384): row_tiles(1, 8),
    (True, 1024): row_tiles(4, 2, stream=True), (True, 4096): row_tiles(2, 4),
    (True, 16384): row_tiles(1, 16, late_params=True, max_regs=64),
}

BWD_CONFIG: dict = {
    (False, 1024): sliced_rows(1, 2, 1, stages=4, fused_sum=True, tma=True),
    (False, 4096): sliced_rows(1, 4, 1, stages=4, fused_sum=True, tma=True),
    (False, 16384): sliced_rows(1, 8, 2, stages=4, fused_sum=True, hold_other_w=True),
    (True, 1024): sliced_rows(1, 2, 1, stages=8, fused_sum=True, tma=True),
    (True, 4096): whole_row(1, 8, stages=3, fused_sum=True),
    (True, 16384): sliced_rows(1, 8, 2, stages=2, tma=True, hold_other_w=True),
}


_PREFETCHED = {False: 0, "x": 1, True: 2}  # whole_row's prefetch -> the kernel's PREFETCH


def _fwd_meta(n_cols, is_ln=False) -> tuple[int, dict]:
    block_n = triton.next_power_of_2(n_cols)
    cfg = FWD_CONFIG.get((bool(is_ln), block_n))
    if cfg is not None:
        return block_n, cfg
    block_m = max(1, min(16, 4096 // block_n))
    return block_n, row_tiles(block_m, 4 if block_n * block_m <= 4096 else (8 if block_n <= 8192 else 16))


def _bwd_meta(n_cols, is_ln=False) -> tuple[int, dict]:
    block_n = triton.next_power_of_2(n_cols)
    cfg = BWD_CONFIG.get((bool(is_ln), block_n))
    if cfg is not None:
        return block_n, cfg
    per_sm = 4 if block_n <= 4096 else (2 if block_n <= 8192 else 1)
    num_warps = 4 if block_n <= 2048 else (8 if block_n <= 4096 else 16)
    return block_n, whole_row(per_sm, num_warps, acc_in_global=block_n >= 16384, reload_w=block_n >= 8192)


TMA_LINE = 256  # columns per line where rows are moved as 2-D TMA tiles (a TMA box side is at most 256)


def _tma_lines(n_cols, slices, *tensors) -> int:
    """Lines of TMA_LINE columns in one row slice where rows can be moved as [lines, TMA_LINE] TMA tiles:
    power-of-two rows of at least TMA_LINE columns a slice, 16-byte aligned data, on a GPU with a TMA
    (sm_90 on) or under Triton's interpreter; else 0."""
    lines = n_cols // (slices * TMA_LINE)
    if not (1 <= lines <= 256 and lines * slices * TMA_LINE == n_cols and lines == triton.next_power_of_2(lines)):
        return 0
    if any(t.data_ptr() % 16 for t in tensors):
        return 0
    device = tensors[0].device
    if device.type == "cuda" and _cuda_properties(device).major < 9:
        return 0
    return lines


def _tma_tiles(t: torch.Tensor, lines: int) -> TensorDescriptor:
    """Contiguous rows ``t`` as lines of TMA_LINE columns, moved ``lines`` lines at a time."""
    return TensorDescriptor(t, [t.numel() // TMA_LINE, TMA_LINE], [TMA_LINE, 1], [lines, TMA_LINE])


_CUDA_PROPERTIES = {}


def _cuda_properties(device):
    """A CUDA device's properties, read once per device (every launch consults them)."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _CUDA_PROPERTIES:
        _CUDA_PROPERTIES[idx] = torch.cuda.get_device_properties(idx)
    return _CUDA_PROPERTIES[idx]


def _sm_count(device) -> int:
    return _cuda_properties(device).multi_processor_count if device.type == "cuda" else 4


def norm_forward(x2, w, b, eps, is_ln, config: dict | None = None):
    """y and the saved statistics; ``config`` overrides the launch settings (a FWD_CONFIG value)."""
    n_rows, n_cols = x2.shape
    y = torch.empty_like(x2)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x2.device)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x2.device) if is_ln else rstd
    block_n, cfg = _fwd_meta(n_cols, is_ln)
    cfg = config or cfg
    b = b if b is not None else w
    tensors = (x2, w, b, y, mean, rstd)
    key = (x2.dtype, w.dtype, x2.device.index, n_rows, n_cols, is_ln, block_n) + tuple(cfg.items())
    if "chunk" in cfg:
        if n_cols % cfg["chunk"] == 0:
            _FWD_CHUNKED((n_rows,), key, tensors + (n_cols, eps, is_ln, cfg["chunk"]), cfg["num_warps"],
                         tensors=tensors)
            return y, mean, rstd
        cfg = row_tiles(1, cfg["num_warps"], one_row=True)
    hints = ("evict_first", ".cs") if cfg["stream"] else ("", "")
    max_regs = cfg.get("max_regs")
    if cfg["one_row"]:
        _FWD_ROW((n_rows,), key, tensors + (n_cols, eps, is_ln, block_n) + hints
                 + (cfg.get("late_params", False), n_cols == block_n),
                 cfg["num_warps"], tensors=tensors, max_regs=max_regs)
    else:
        _FWD((triton.cdiv(n_rows, cfg["rows"]),), key,
             tensors + (n_rows, n_cols, eps, is_ln, cfg["rows"], block_n) + hints, cfg["num_warps"], tensors=tensors,
             max_regs=max_regs)
    return y, mean, rstd


_SYNC_WORDS: dict = {}


def _sync_words(device) -> torch.Tensor:
    """The two int32 words ``_grid_sync`` works on, one pair per device and stream (zeroed once; every
    launch leaves them as it found them but for the generation count)."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (str(device), stream)
    if key not in _SYNC_WORDS:
        _SYNC_WORDS[key] = torch.zeros(2, dtype=torch.int32, device=device)
    return _SYNC_WORDS[key]


def _all_resident(device, n_progs) -> bool:
    """Whether ``n_progs`` programs of one program per SM at most can all run at once (a grid barrier needs
    that). Triton's interpreter runs programs one after another, so off CUDA only a single program can."""
    return n_progs <= (_sm_count(device) if device.type == "cuda" else 1)


def norm_backward(dy2, x2, w, mean, rstd, is_ln, config: dict | None = None):
    """dx and the parameter gradients; ``config`` overrides the launch settings (a BWD_CONFIG value)."""
    n_rows, n_cols = x2.shape
    block_n, cfg = _bwd_meta(n_cols, is_ln)
    cfg = config or cfg
    slices = cfg.get("slices", 1)
    n_groups = min(n_rows, max(1, _sm_count(x2.device) * cfg["per_sm"] // slices))
    rows_per_prog = triton.cdiv(n_rows, n_groups)
    n_groups = triton.cdiv(n_rows, rows_per_prog)
    n_progs = n_groups * slices
    fused = bool(cfg.get("fused_sum")) and _all_resident(x2.device, n_progs)
    dx = torch.empty_like(x2)
    parts = torch.empty((2 if is_ln else 1, n_groups, n_cols), dtype=torch.float32, device=x2.device)
    grads = torch.empty((parts.shape[0], n_cols), dtype=w.dtype, device=x2.device)
    sync = _sync_words(x2.device) if fused else parts  # any pointer: unused without the barrier
    # The fused epilogue: each program sums sum_n columns over the groups, sum_g groups at a time.
    sum_n = triton.next_power_of_2(triton.cdiv(n_cols, n_progs))
    sum_g = max(1, min(triton.next_power_of_2(n_groups), 8192 // sum_n))
    tensors = (dy2, x2, w, mean, rstd, dx, parts[0], parts[-1], grads, sync)
    key = (x2.dtype, w.dtype, x2.device.index, n_rows, n_cols, is_ln, block_n, rows_per_prog, fused) \
        + tuple(cfg.items())
    common = (n_rows, n_cols, rows_per_prog, n_groups, is_ln)
    if "slices" in cfg:
        lines = _tma_lines(n_cols, slices, dy2, x2) if cfg.get("tma") else 0
        hold_other_w = bool(cfg.get("hold_other_w")) and slices == 2
        sources = (_tma_tiles(dy2, lines), _tma_tiles(x2, lines)) if lines else (dy2, x2)
        _BWD_SLICED((n_progs,), key + (lines,), sources + (dx, w, mean, rstd, parts[0], parts[-1], grads, sync) + common
                    + (block_n // slices, slices, TMA_LINE if lines else 0, cfg["reload_w"], hold_other_w,
                       cfg["stages"], fused, sum_g, sum_n),
                    cfg["num_warps"], tensors=tensors)
    else:
        _BWD((n_progs,), key, tensors + common + (block_n, cfg["reload_w"], cfg["acc_in_global"],
                                                  _PREFETCHED[cfg["prefetch"]], cfg["stages"], fused, sum_g, sum_n),
             cfg["num_warps"], tensors=tensors)
    if not fused:
        # Column sums over the per-program partials, dW and dB in one launch, cast to the parameters' dtype.
        _SUM_PARTIALS((triton.cdiv(n_cols, _SUM_COLS), parts.shape[0]),
                      (w.dtype, x2.device.index, n_groups, n_cols, is_ln),
                      (parts, grads, n_groups, n_cols, _SUM_GROUPS, _SUM_COLS), 4, tensors=(parts, grads))
    return dx, grads[0], (grads[1] if is_ln else None)


class KernelIndexNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps, is_ln):
        x2 = x.reshape(-1, x.shape[-1])
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        y, mean, rstd = norm_forward(x2, weight, bias, eps, is_ln)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.is_ln = is_ln
        ctx.x_shape = x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, mean, rstd = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1])
        if not dy2.is_contiguous():
            dy2 = dy2.contiguous()
        dx, dw, db = norm_backward(dy2, x2, w, mean, rstd, ctx.is_ln)
        return dx.view(ctx.x_shape), dw, db, None, None


def kernelindex_rms_norm(x, weight, eps=DEFAULT_EPS):
    return KernelIndexNorm.apply(x, weight, None, eps, False)


def kernelindex_layer_norm(x, weight, bias, eps=DEFAULT_EPS):
    return KernelIndexNorm.apply(x, weight, bias, eps, True)


def _torch_llama_rms_norm(x, w, eps):
    """PyTorch equivalent of Transformers LlamaRMSNorm.forward."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def build(provider: str, inputs: dict, params: dict | None = None) -> Built:
    eps = _eps(params or {})
    x = inputs["x"]
    hidden = x.shape[-1]
    if provider == "kernelindex":
        leaves = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (kernelindex_rms_norm(leaves["x"], leaves["weight"], eps),), leaves,
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
        LigerRMSNorm = liger_attr(x, "rms_norm", "LigerRMSNorm")
        module = LigerRMSNorm(hidden_size=hidden, eps=eps).to(device=x.device, dtype=x.dtype)
        label = f"Liger-Kernel {package_version('liger-kernel')} LigerRMSNorm"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    with torch.no_grad():
        module.weight.copy_(inputs["weight"])
    return Built(lambda: (module(x_leaf),), {"x": x_leaf, "weight": module.weight}, label, OUTPUT_NAMES,
                 extra={"module": module})


def norm_bytes(kernel, params, dtype, mode, n_params: int) -> int:
    """Forward reads x and the parameters, writes y; backward reads dy, x and the parameters, writes dx and
    the parameter gradients; full reads x, parameters, dy once, writes y, dx and the parameter gradients.
    The saved per-row statistics (4-8 bytes a row) are not counted."""
    s = _shapes(kernel, params)
    e = BYTES_PER_ELEMENT[dtype]
    xb = numel(s["x"]) * e
    pb = n_params * s["x"][-1] * e
    return {"forward": 2 * xb + pb, "backward": 3 * xb + 2 * pb, "full": 4 * xb + 2 * pb}[mode]


def norm_flops(kernel, params, mode, per_elem_fwd: int, per_elem_bwd: int) -> int:
    s = _shapes(kernel, params)
    n = numel(s["x"])
    return {"forward": per_elem_fwd * n, "backward": per_elem_bwd * n,
            "full": (per_elem_fwd + per_elem_bwd) * n}[mode]


def bytes_moved(params, dtype, mode) -> int:
    return norm_bytes(KERNEL, params, dtype, mode, 1)


def flops(params, mode) -> int:
    """Forward: square, sum, scale, weight (4 per element); backward about 8 per element."""
    return norm_flops(KERNEL, params, mode, 4, 8)
