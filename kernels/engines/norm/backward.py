"""The norm backward kernels: dx, and per-row-group partial sums of dW (and dB).

A fixed grid (a small multiple of the SM count) walks contiguous runs of rows; each program keeps the
partial sums of its rows (in registers or its own row of the partials buffer) and ``partials`` turns
them into the gradients. Two kernels, one per backward setting type (``settings.WholeRow``,
``SlicedRows``), each with its cached launcher.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.launch import CachedLaunch
from kernels.engines.norm.partials import sum_partials_after_all
from kernels.engines.norm.rows import load_row, store_row


@triton.jit
def _norm_dx(
    xhat,
    wdy,
    rstd,
    s1,
    s2,
    n_cols,
    IS_LN: tl.constexpr,
):
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
def _row_stats(
    mean_ptr,
    rstd_ptr,
    row,
    IS_LN: tl.constexpr,
):
    """A row's saved (mean, rstd) from the forward; the mean is 0 for RMSNorm."""
    rstd = tl.load(rstd_ptr + row)
    if IS_LN:
        mean = tl.load(mean_ptr + row)
    else:
        mean = 0.0
    return mean, rstd


@triton.jit
def _norm_bwd_kernel(
    dy_ptr,
    x_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    dx_ptr,
    dw_part_ptr,
    db_part_ptr,
    grads_ptr,
    sync_ptr,
    n_rows,
    n_cols,
    rows_per_prog,
    n_groups,
    IS_LN: tl.constexpr,
    BLOCK_N: tl.constexpr,
    RELOAD_W: tl.constexpr,
    ACC_IN_GLOBAL: tl.constexpr,
    PREFETCH: tl.constexpr,
    STAGES: tl.constexpr,
    FUSED_SUM: tl.constexpr,
    SUM_G: tl.constexpr,
    SUM_N: tl.constexpr,
):
    """Whole rows, ``rows_per_prog`` of them a program. PREFETCH: 0 none, 1 the next row's x, 2 its x and dy."""
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
        sum_partials_after_all(dw_part_ptr, db_part_ptr, grads_ptr, sync_ptr, n_groups, n_cols, IS_LN, SUM_G, SUM_N)


@triton.jit
def _slice_of_row(
    src,
    base,
    row,
    part,
    cols,
    ok,
    SLICE: tl.constexpr,
    N_SLICES: tl.constexpr,
    TMA_LINE: tl.constexpr,
):
    """Slice ``part`` of a row of x or dy as float32: one [SLICE // TMA_LINE, TMA_LINE] TMA tile where
    TMA_LINE > 0 (``src`` a descriptor over lines of TMA_LINE columns), else a masked load at ``cols``."""
    if TMA_LINE:
        lines: tl.constexpr = SLICE // TMA_LINE
        v = src.load([row * (lines * N_SLICES) + part * lines, 0])
    else:
        v = tl.load(src + base + cols, mask=ok, other=0.0)
    return v.to(tl.float32)


@triton.jit
def _norm_bwd_sliced_kernel(
    dy_src,
    x_src,
    dx_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    dw_part_ptr,
    db_part_ptr,
    grads_ptr,
    sync_ptr,
    n_rows,
    n_cols,
    rows_per_prog,
    n_groups,
    IS_LN: tl.constexpr,
    SLICE: tl.constexpr,
    N_SLICES: tl.constexpr,
    TMA_LINE: tl.constexpr,
    RELOAD_W: tl.constexpr,
    HOLD_OTHER_W: tl.constexpr,
    STAGES: tl.constexpr,
    FUSED_SUM: tl.constexpr,
    SUM_G: tl.constexpr,
    SUM_N: tl.constexpr,
):
    """Rows split over N_SLICES programs that walk the same rows side by side, each owning one column
    slice: its dx and its slice of the dW (dB) partial sums, so each holds 1/N_SLICES of the registers a
    whole row needs. A row's sums run over every slice, so each program also reads the other slices (sums
    only, before its own): its partners read the same bytes at about the same time, so L2 serves the
    repeats and HBM still sees each element once. STAGES > 1 lets the compiler pipeline the row loop.
    HOLD_OTHER_W (two slices): the other slice's w is loaded once too, not with every row.
    TMA_LINE > 0: x and dy come as TMA tiles (``dy_src``, ``x_src`` descriptors; rows that fill the
    tiles, so no masks): the loads land in shared memory, so the pipelined loop keeps the next rows'
    slices in flight, in any dtype and without holding them in registers, while this row computes. dx
    leaves by plain stores either way: TMA stores, through shared memory, measured slower."""
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
        w = load_row(w_ptr + cols, col_ok, EVEN, "")
    if HOLD_OTHER_W:
        tl.static_assert(N_SLICES == 2)
        o_cols = (1 - part) * SLICE + lanes
        w_other = load_row(w_ptr + o_cols, o_cols < n_cols, EVEN, "")
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
                w_other = load_row(w_ptr + o_cols, o_ok, EVEN, "")
            wdy_o = w_other * _slice_of_row(dy_src, base, row, other, o_cols, o_ok, SLICE, N_SLICES, TMA_LINE)
            xhat_o = (xo - mean) * rstd
            if not EVEN:
                xhat_o = tl.where(o_ok, xhat_o, 0.0)
            s1 += tl.sum(xhat_o * wdy_o)
            s2 += tl.sum(wdy_o)
        x = _slice_of_row(x_src, base, row, part, cols, col_ok, SLICE, N_SLICES, TMA_LINE)
        dy = _slice_of_row(dy_src, base, row, part, cols, col_ok, SLICE, N_SLICES, TMA_LINE)
        if RELOAD_W:
            w = load_row(w_ptr + cols, col_ok, EVEN, "")
        xhat = (x - mean) * rstd
        if not EVEN:
            xhat = tl.where(col_ok, xhat, 0.0)
        dx = _norm_dx(xhat, w * dy, rstd, s1, s2, n_cols, IS_LN).to(dx_ptr.dtype.element_ty)
        store_row(dx_ptr + base + cols, dx, col_ok, EVEN, "")
        dw_acc += dy * xhat
        if IS_LN:
            db_acc += dy
    p_off = group * n_cols + cols
    store_row(dw_part_ptr + p_off, dw_acc, col_ok, EVEN, "")
    if IS_LN:
        store_row(db_part_ptr + p_off, db_acc, col_ok, EVEN, "")
    if FUSED_SUM:
        sum_partials_after_all(dw_part_ptr, db_part_ptr, grads_ptr, sync_ptr, n_groups, n_cols, IS_LN, SUM_G, SUM_N)


WHOLE_ROWS = CachedLaunch(_norm_bwd_kernel)
SLICED_ROWS = CachedLaunch(_norm_bwd_sliced_kernel)
