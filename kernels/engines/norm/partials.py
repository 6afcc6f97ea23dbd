"""The weight (and bias) gradients from the backward's per-program partial sums.

The backward kernels leave, per row group, one float32 row of dW (and dB) partial sums. They are summed
over the groups either by ``SUM_PARTIALS``, a second launch, or by the backward's own programs after a
grid barrier (``sum_partials_after_all``, where every program is resident at once).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.launch import CachedLaunch

# The separate launch sums tiles of SUM_GROUPS groups x SUM_COLS columns, with SUM_WARPS warps.
SUM_GROUPS = 64
SUM_COLS = 128
SUM_WARPS = 4
# The fused epilogue's tile holds at most as many partials as the separate launch's.
FUSED_TILE_ELEMENTS = SUM_GROUPS * SUM_COLS


@triton.jit
def _column_sums(
    part_ptr,
    out_ptr,
    n_groups,
    n_cols,
    cols,
    BLOCK_G: tl.constexpr,
):
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
def _sum_partials_kernel(
    part_ptr,
    out_ptr,
    n_groups,
    n_cols,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """out[k, c] = sum over g of part[k, g, c]: the weight (and bias) gradients from the backward's
    per-program partial sums, in one launch."""
    k = tl.program_id(1)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    _column_sums(part_ptr + k.to(tl.int64) * n_groups * n_cols, out_ptr + k * n_cols, n_groups, n_cols, cols, BLOCK_G)


@triton.jit
def _grid_sync(
    sync_ptr,
    n_progs,
):
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
def sum_partials_after_all(
    dw_part_ptr,
    db_part_ptr,
    grads_ptr,
    sync_ptr,
    n_groups,
    n_cols,
    IS_LN: tl.constexpr,
    SUM_G: tl.constexpr,
    SUM_N: tl.constexpr,
):
    """The backward's epilogue instead of the SUM_PARTIALS launch: once every program has stored its
    partial sums, each sums SUM_N columns of them over the groups into the weight (and bias) gradients."""
    _grid_sync(sync_ptr, tl.num_programs(0))
    cols = tl.program_id(0) * SUM_N + tl.arange(0, SUM_N)
    _column_sums(dw_part_ptr, grads_ptr, n_groups, n_cols, cols, SUM_G)
    if IS_LN:
        _column_sums(db_part_ptr, grads_ptr + n_cols, n_groups, n_cols, cols, SUM_G)


SUM_PARTIALS = CachedLaunch(_sum_partials_kernel)
