"""The norm forward kernels: y and the per-row statistics (rstd, and the mean for LayerNorm), float32.

Three kernels, one per forward setting type (``settings.RowTiles``, ``OneRow``, ``RowChunks``), each with
its cached launcher. ``IS_LN`` selects LayerNorm (mean and bias) over RMSNorm.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.launch import CachedLaunch
from kernels.engines.norm.rows import load_row, store_row


@triton.jit
def _norm_fwd_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    n_rows,
    n_cols,
    eps,
    IS_LN: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    X_EVICT: tl.constexpr,
    Y_CACHE: tl.constexpr,
):
    """BLOCK_M whole rows a program, as one 2-D tile."""
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
def _norm_fwd_row_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    n_cols,
    eps,
    IS_LN: tl.constexpr,
    BLOCK_N: tl.constexpr,
    X_EVICT: tl.constexpr,
    Y_CACHE: tl.constexpr,
    LATE_PARAMS: tl.constexpr,
    EVEN: tl.constexpr,
):
    """One row per program as a 1-D tile (wide rows): the compiler spreads the row over every warp.
    ``LATE_PARAMS``: w and b are loaded after the statistics, so only x is held across the reductions (with
    a register cap, more rows fit on an SM); else before x. ``EVEN``: n_cols == BLOCK_N."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    if not LATE_PARAMS:
        w = load_row(w_ptr + cols, col_ok, EVEN, "")
        if IS_LN:
            b = load_row(b_ptr + cols, col_ok, EVEN, "")
    x = load_row(x_ptr + row * n_cols + cols, col_ok, EVEN, X_EVICT)
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
        w = load_row(w_ptr + cols, col_ok, EVEN, "")
        if IS_LN:
            b = load_row(b_ptr + cols, col_ok, EVEN, "")
    y = x * rstd * w
    if IS_LN:
        y += b
    store_row(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), col_ok, EVEN, Y_CACHE)


@triton.jit
def _norm_fwd_chunked_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    n_cols,
    eps,
    IS_LN: tl.constexpr,
    CHUNK: tl.constexpr,
):
    """One row per program in two sweeps of CHUNK columns (n_cols a multiple of CHUNK): the first folds the
    chunks' statistics together (LayerNorm: each chunk's mean and squared deviations, merged as in Chan et
    al.'s parallel variance), the second reads the row again (from L2) and writes y. A program holds one
    chunk in registers, not the row, so more rows are in flight per SM than with the row held. The sweeps
    are not pipelined: chunks staged in shared memory measured slower."""
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


ROW_TILES = CachedLaunch(_norm_fwd_kernel)
ONE_ROW = CachedLaunch(_norm_fwd_row_kernel)
ROW_CHUNKS = CachedLaunch(_norm_fwd_chunked_kernel)
