"""Launch settings of the norm kernels: one record type per kernel, and the measured setting per row width.

A setting is a frozen record whose type picks the kernel (``RowTiles``, ``OneRow``, ``RowChunks`` for the
forward; ``WholeRow``, ``SlicedRows`` for the backward) and whose fields are that kernel's launch
parameters. ``measured_in`` names the evidence file (``data/evidence/``) and the workload whose
measurement chose a committed setting; ``docs/kernel-decisions.md`` has the comparison behind each.
The tables are keyed by (norm, padded row width): the rerun widths were swept on an H200
(``python -m kernelindex_pipeline.gpu.tune``); other widths get the rules in ``forward_setting`` and
``backward_setting``, which were never swept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import triton


def _check_positive(record, *names: str) -> None:
    for name in names:
        if getattr(record, name) < 1:
            raise ValueError(f"{type(record).__name__}.{name} must be at least 1, got {getattr(record, name)}")


@dataclass(frozen=True, kw_only=True)
class RowTiles:
    """Forward: ``rows_per_program`` whole rows as one 2-D tile per program.

    ``stream``: cache hints for data touched once (x loaded evict-first, y stored streaming).
    """

    rows_per_program: int
    warps: int
    stream: bool = False
    measured_in: str = field(default="", compare=False, repr=False)

    def __post_init__(self):
        _check_positive(self, "rows_per_program", "warps")


@dataclass(frozen=True, kw_only=True)
class OneRow:
    """Forward: one row per program as a 1-D tile, which the compiler spreads over every warp (wide rows).

    ``late_params``: w and b loaded after the row's statistics, so that only x is held across the
    reductions; with ``max_regs`` (a register cap per thread) more programs then fit on an SM.
    """

    warps: int
    stream: bool = False
    late_params: bool = False
    max_regs: int | None = None
    measured_in: str = field(default="", compare=False, repr=False)

    def __post_init__(self):
        _check_positive(self, "warps")
        if self.max_regs is not None:
            _check_positive(self, "max_regs")


@dataclass(frozen=True, kw_only=True)
class RowChunks:
    """Forward: one row per program in two sweeps of ``chunk`` columns (statistics, then y), holding one
    chunk in registers rather than the row; a row length that is not a multiple of ``chunk`` takes
    ``OneRow`` with the same warps."""

    chunk: int
    warps: int
    measured_in: str = field(default="", compare=False, repr=False)

    def __post_init__(self):
        _check_positive(self, "chunk", "warps")


Prefetch = Literal["none", "x", "x_dy"]


@dataclass(frozen=True, kw_only=True)
class WholeRow:
    """Backward: a fixed grid of ``programs_per_sm`` programs per SM, each walking a contiguous run of
    whole rows.

    ``partials_in_memory``: the dW (dB) partial sums kept in the program's own row of the partials buffer
    (cache-resident) rather than registers, for rows whose partials would spill. ``reload_w``: w read
    again for every row rather than held in registers. ``prefetch``: the next row's x, or x and dy, loaded
    into registers before this row's reductions. ``stages``: the row loop's software-pipelining depth
    (the next rows' loads staged in shared memory). ``fused_sum``: the programs sum the partials into dW
    (dB) themselves after a grid barrier instead of a second launch; it applies only where every
    program is resident at once (one per SM at most), else the second launch runs.
    """

    programs_per_sm: int
    warps: int
    partials_in_memory: bool = False
    reload_w: bool = False
    prefetch: Prefetch = "none"
    stages: int = 1
    fused_sum: bool = False
    measured_in: str = field(default="", compare=False, repr=False)

    def __post_init__(self):
        _check_positive(self, "programs_per_sm", "warps", "stages")
        if self.prefetch not in ("none", "x", "x_dy"):
            raise ValueError(f"WholeRow.prefetch must be 'none', 'x' or 'x_dy', got {self.prefetch!r}")


@dataclass(frozen=True, kw_only=True)
class SlicedRows:
    """Backward: each row's columns split over ``slices`` programs that walk the same rows side by side
    (one slice: whole rows); ``programs_per_sm`` counts programs, so ``programs_per_sm / slices`` row
    groups per SM.

    ``reload_w``, ``stages``, ``fused_sum``: as in ``WholeRow``. ``tma``: x and dy loaded as TMA tiles
    where the rows allow it (power-of-two rows of at least 256 columns a slice, 16-byte aligned, sm_90
    on), else plain loads. ``hold_other_w`` (two slices only): the other slice's w held in registers
    too, rather than loaded with every row.
    """

    programs_per_sm: int
    warps: int
    slices: int
    reload_w: bool = False
    stages: int = 1
    fused_sum: bool = False
    tma: bool = False
    hold_other_w: bool = False
    measured_in: str = field(default="", compare=False, repr=False)

    def __post_init__(self):
        _check_positive(self, "programs_per_sm", "warps", "slices", "stages")
        if self.hold_other_w and self.slices != 2:
            raise ValueError(f"SlicedRows.hold_other_w needs two slices, got {self.slices}")


ForwardSetting = RowTiles | OneRow | RowChunks
BackwardSetting = WholeRow | SlicedRows

# Keyed by (norm, padded row width). The workloads named are the rerun targets: RMSNorm bf16 at 2048 rows,
# LayerNorm fp32 at 4096 rows.
FORWARD_SETTINGS: dict[tuple[str, int], ForwardSetting] = {
    ("rms_norm", 1024): RowTiles(
        rows_per_program=2, warps=4,
        measured_in="h200-2026-12-02-norms.jsonl.gz: rms_norm 2048x1024 bf16 forward"),
    # A program holds one 2048-column chunk, not the row, so more rows are in flight per SM.
    ("rms_norm", 4096): RowChunks(
        chunk=2048, warps=4,
        measured_in="h200-2026-12-03-v13.jsonl.gz: rms_norm 2048x4096 bf16 forward"),
    ("rms_norm", 16384): RowTiles(
        rows_per_program=1, warps=8,
        measured_in="h200-2026-12-02-session3-norms.jsonl.gz: rms_norm 2048x16384 bf16 forward"),
    ("layer_norm", 1024): RowTiles(
        rows_per_program=4, warps=2, stream=True,
        measured_in="h200-2026-12-03-v8.jsonl.gz: layer_norm 4096x1024 fp32 forward"),
    ("layer_norm", 4096): RowTiles(
        rows_per_program=2, warps=4,
        measured_in="h200-2026-12-03-v17-norms.jsonl.gz: layer_norm 4096x4096 fp32 forward"),
    # Only x held across the statistics: capped at 64 registers, two fp32 rows of 16384 fit on an SM.
    ("layer_norm", 16384): OneRow(
        warps=16, late_params=True, max_regs=64,
        measured_in="h200-2026-12-03-v15.jsonl.gz: layer_norm 4096x16384 fp32 forward"),
}

BACKWARD_SETTINGS: dict[tuple[str, int], BackwardSetting] = {
    # Whole rows as TMA tiles: the pipelined loop stages the next rows without holding them in registers.
    ("rms_norm", 1024): SlicedRows(
        programs_per_sm=1, warps=2, slices=1, stages=4, fused_sum=True, tma=True,
        measured_in="h200-2026-12-03-v12.jsonl.gz: rms_norm 2048x1024 bf16 backward"),
    ("rms_norm", 4096): SlicedRows(
        programs_per_sm=1, warps=4, slices=1, stages=4, fused_sum=True, tma=True,
        measured_in="h200-2026-12-03-v11.jsonl.gz: rms_norm 2048x4096 bf16 backward"),
    # Two slices: a whole row's partials leave no registers for the next rows' loads; the other slice's w
    # held in registers leaves room for a fourth stage.
    ("rms_norm", 16384): SlicedRows(
        programs_per_sm=1, warps=8, slices=2, stages=4, fused_sum=True, hold_other_w=True,
        measured_in="h200-2026-12-03-v14-norms.jsonl.gz: rms_norm 2048x16384 bf16 backward"),
    ("layer_norm", 1024): SlicedRows(
        programs_per_sm=1, warps=2, slices=1, stages=8, fused_sum=True, tma=True,
        measured_in="h200-2026-12-03-v12.jsonl.gz: layer_norm 4096x1024 fp32 backward"),
    ("layer_norm", 4096): WholeRow(
        programs_per_sm=1, warps=8, stages=3, fused_sum=True,
        measured_in="h200-2026-12-03-v10.jsonl.gz: layer_norm 4096x4096 fp32 backward"),
    # fp32 rows: two stages are what fits in shared memory.
    ("layer_norm", 16384): SlicedRows(
        programs_per_sm=1, warps=8, slices=2, stages=2, tma=True, hold_other_w=True,
        measured_in="h200-2026-12-03-v14-norms.jsonl.gz: layer_norm 4096x16384 fp32 backward"),
}


def norm_name(is_ln: bool) -> str:
    return "layer_norm" if is_ln else "rms_norm"


def forward_setting(n_cols: int, is_ln: bool) -> tuple[int, ForwardSetting]:
    """(padded row width, setting) for the forward over rows of ``n_cols``. Widths not in the table: tiles
    of up to 4096 elements (at most 16 rows), more warps as the tile or the row grows."""
    block_n = triton.next_power_of_2(n_cols)
    committed = FORWARD_SETTINGS.get((norm_name(is_ln), block_n))
    if committed is not None:
        return block_n, committed
    rows = max(1, min(16, 4096 // block_n))
    warps = 4 if block_n * rows <= 4096 else (8 if block_n <= 8192 else 16)
    return block_n, RowTiles(rows_per_program=rows, warps=warps)


def backward_setting(n_cols: int, is_ln: bool) -> tuple[int, BackwardSetting]:
    """(padded row width, setting) for the backward over rows of ``n_cols``. Widths not in the table: whole
    rows, fewer programs per SM and more warps as rows widen; from 8192 columns w is re-read per row and
    from 16384 the partials live in memory, where holding them in registers would spill."""
    block_n = triton.next_power_of_2(n_cols)
    committed = BACKWARD_SETTINGS.get((norm_name(is_ln), block_n))
    if committed is not None:
        return block_n, committed
    per_sm = 4 if block_n <= 4096 else (2 if block_n <= 8192 else 1)
    warps = 4 if block_n <= 2048 else (8 if block_n <= 4096 else 16)
    return block_n, WholeRow(programs_per_sm=per_sm, warps=warps, partials_in_memory=block_n >= 16384,
                             reload_w=block_n >= 8192)
