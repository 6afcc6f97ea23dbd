"""How the gated MLP is put together and launched: typed records, each with the measurement behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, kw_only=True)
class GluTiles:
    """The activation kernels' tiles: ``rows_per_program`` x ``columns_per_program`` of [tokens, I]."""

    rows_per_program: int
    columns_per_program: int
    warps: int
    measured_in: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class MlpAssembly:
    """The GEMMs around the activation kernels.

    ``fuse_min_tokens``: from this many tokens, gate and up come from one GEMM against [w_gate; w_up], and
    dx and both weight gradients are one GEMM each over 2 x intermediate; below it, two GEMMs each. The
    fused form pays for concatenating the weights on every call, about 360 / tokens of the gate/up GEMM
    time at the measured copy and matmul rates, so it loses on few tokens. ``save_h``: keep the
    activation product h from the forward (one more tokens x I tensor alive between the passes) rather
    than recompute it in the backward kernel. ``blas``: the library PyTorch sends the GEMMs to (None:
    PyTorch's choice, cuBLAS on NVIDIA; "cublaslt"), set around each direction on CUDA.
    """

    fuse_min_tokens: int
    save_h: bool
    blas: Literal["cublaslt"] | None = None
    measured_in: str = field(default="", compare=False, repr=False)


# Not swept: the activation kernels move a few percent of a pass's time, the GEMMs the rest.
GLU_TILES = GluTiles(rows_per_program=4, columns_per_program=1024, warps=8,
                     measured_in="h200-2026-12-02.jsonl.gz: geglu 8x8192x4096x11008 bf16")

MLP_ASSEMBLY = MlpAssembly(
    fuse_min_tokens=16384, save_h=True, blas=None,
    measured_in="h200-2026-12-02-session3-swiglu.jsonl.gz: swiglu 8192 and 32768 tokens bf16 "
                "(blas: h200-2026-12-03-mlps-cublas.jsonl.gz)")
