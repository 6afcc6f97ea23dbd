"""Host side of the norm engine: pick the launch setting, allocate, launch the forward or the backward.

``norm_forward`` and ``norm_backward`` take 2-D contiguous rows; ``setting`` overrides the committed
setting for the row width (the tune sweep and the tests pass candidates).
"""

from __future__ import annotations

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels.launch import cuda_properties, sm_count
from kernels.engines.norm import backward, forward, partials
from kernels.engines.norm.settings import (
    BackwardSetting,
    ForwardSetting,
    OneRow,
    RowChunks,
    SlicedRows,
    backward_setting,
    forward_setting,
)

# Columns per line where rows are moved as 2-D TMA tiles (a TMA box side is at most 256 elements).
TMA_LINE = 256
PREFETCH_ROWS = {"none": 0, "x": 1, "x_dy": 2}  # WholeRow.prefetch -> the kernel's PREFETCH


def norm_forward(x2, w, b, eps, is_ln, setting: ForwardSetting | None = None):
    """(y, mean, rstd) of rows ``x2``; mean is rstd's buffer for RMSNorm (no mean)."""
    n_rows, n_cols = x2.shape
    y = torch.empty_like(x2)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x2.device)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x2.device) if is_ln else rstd
    block_n, committed = forward_setting(n_cols, is_ln)
    setting = setting or committed
    b = b if b is not None else w
    tensors = (x2, w, b, y, mean, rstd)
    key = (x2.dtype, w.dtype, x2.device.index, n_rows, n_cols, is_ln, block_n, setting)
    if isinstance(setting, RowChunks):
        if n_cols % setting.chunk == 0:
            forward.ROW_CHUNKS((n_rows,), key, tensors + (n_cols, eps, is_ln, setting.chunk), setting.warps,
                               tensors=tensors)
            return y, mean, rstd
        setting = OneRow(warps=setting.warps)
    hints = ("evict_first", ".cs") if setting.stream else ("", "")
    if isinstance(setting, OneRow):
        forward.ONE_ROW((n_rows,), key, tensors + (n_cols, eps, is_ln, block_n) + hints
                        + (setting.late_params, n_cols == block_n),
                        setting.warps, tensors=tensors, max_regs=setting.max_regs)
    else:
        rows = setting.rows_per_program
        forward.ROW_TILES((triton.cdiv(n_rows, rows),), key,
                          tensors + (n_rows, n_cols, eps, is_ln, rows, block_n) + hints, setting.warps,
                          tensors=tensors)
    return y, mean, rstd


def tma_lines(n_cols, slices, *tensors) -> int:
    """Lines of TMA_LINE columns in one row slice where rows can be moved as [lines, TMA_LINE] TMA tiles:
    power-of-two rows of at least TMA_LINE columns a slice, 16-byte aligned data, on a GPU with a TMA
    (sm_90 on) or under Triton's interpreter; else 0."""
    lines = n_cols // (slices * TMA_LINE)
    if not (1 <= lines <= 256 and lines * slices * TMA_LINE == n_cols and lines == triton.next_power_of_2(lines)):
        return 0
    if any(t.data_ptr() % 16 for t in tensors):
        return 0
    device = tensors[0].device
    if device.type == "cuda" and cuda_properties(device).major < 9:
        return 0
    return lines


def tma_tiles(t: torch.Tensor, lines: int) -> TensorDescriptor:
    """Contiguous rows ``t`` as lines of TMA_LINE columns, moved ``lines`` lines at a time."""
    return TensorDescriptor(t, [t.numel() // TMA_LINE, TMA_LINE], [TMA_LINE, 1], [lines, TMA_LINE])


_SYNC_WORDS: dict = {}


def sync_words(device) -> torch.Tensor:
    """The two int32 words the grid barrier works on, one pair per device and stream (zeroed once; every
    launch leaves them as it found them but for the generation count)."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (str(device), stream)
    if key not in _SYNC_WORDS:
        _SYNC_WORDS[key] = torch.zeros(2, dtype=torch.int32, device=device)
    return _SYNC_WORDS[key]


def all_resident(device, n_progs) -> bool:
    """Whether ``n_progs`` programs of one program per SM at most can all run at once (a grid barrier needs
    that). Triton's interpreter runs programs one after another, so off CUDA only a single program can."""
    return n_progs <= (sm_count(device) if device.type == "cuda" else 1)


def norm_backward(dy2, x2, w, mean, rstd, is_ln, setting: BackwardSetting | None = None):
    """(dx, dw, db) from the forward's saved statistics; db is None for RMSNorm."""
    n_rows, n_cols = x2.shape
    block_n, committed = backward_setting(n_cols, is_ln)
    setting = setting or committed
    slices = setting.slices if isinstance(setting, SlicedRows) else 1
    n_groups = min(n_rows, max(1, sm_count(x2.device) * setting.programs_per_sm // slices))
    rows_per_prog = triton.cdiv(n_rows, n_groups)
    n_groups = triton.cdiv(n_rows, rows_per_prog)
    n_progs = n_groups * slices
    fused = setting.fused_sum and all_resident(x2.device, n_progs)
    dx = torch.empty_like(x2)
    parts = torch.empty((2 if is_ln else 1, n_groups, n_cols), dtype=torch.float32, device=x2.device)
    grads = torch.empty((parts.shape[0], n_cols), dtype=w.dtype, device=x2.device)
    sync = sync_words(x2.device) if fused else parts  # any pointer: unused without the barrier
    # The fused epilogue: each program sums sum_n columns over the groups, sum_g groups at a time.
    sum_n = triton.next_power_of_2(triton.cdiv(n_cols, n_progs))
    sum_g = max(1, min(triton.next_power_of_2(n_groups), partials.FUSED_TILE_ELEMENTS // sum_n))
    tensors = (dy2, x2, w, mean, rstd, dx, parts[0], parts[-1], grads, sync)
    key = (x2.dtype, w.dtype, x2.device.index, n_rows, n_cols, is_ln, block_n, rows_per_prog, fused, setting)
    common = (n_rows, n_cols, rows_per_prog, n_groups, is_ln)
    if isinstance(setting, SlicedRows):
        lines = tma_lines(n_cols, slices, dy2, x2) if setting.tma else 0
        sources = (tma_tiles(dy2, lines), tma_tiles(x2, lines)) if lines else (dy2, x2)
        backward.SLICED_ROWS((n_progs,), key + (lines,),
                             sources + (dx, w, mean, rstd, parts[0], parts[-1], grads, sync) + common
                             + (block_n // slices, slices, TMA_LINE if lines else 0, setting.reload_w,
                                setting.hold_other_w, setting.stages, fused, sum_g, sum_n),
                             setting.warps, tensors=tensors)
    else:
        backward.WHOLE_ROWS((n_progs,), key,
                            tensors + common + (block_n, setting.reload_w, setting.partials_in_memory,
                                                PREFETCH_ROWS[setting.prefetch], setting.stages, fused, sum_g,
                                                sum_n),
                            setting.warps, tensors=tensors)
    if not fused:
        partials.SUM_PARTIALS((triton.cdiv(n_cols, partials.SUM_COLS), parts.shape[0]),
                              (w.dtype, x2.device.index, n_groups, n_cols, is_ln),
                              (parts, grads, n_groups, n_cols, partials.SUM_GROUPS, partials.SUM_COLS),
                              partials.SUM_WARPS, tensors=(parts, grads))
    return dx, grads[0], (grads[1] if is_ln else None)
