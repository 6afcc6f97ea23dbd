"""Row loads and stores the forward and backward kernels share: masked, or not where the row fills the tile."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def load_row(
    ptrs,
    col_ok,
    EVEN: tl.constexpr,
    EVICT: tl.constexpr,
):
    """A row (or w, b) as float32; ``EVEN``: the row fills the tile, so no mask (masks cost registers)."""
    if EVEN:
        v = tl.load(ptrs, eviction_policy=EVICT)
    else:
        v = tl.load(ptrs, mask=col_ok, other=0.0, eviction_policy=EVICT)
    return v.to(tl.float32)


@triton.jit
def store_row(
    ptrs,
    v,
    col_ok,
    EVEN: tl.constexpr,
    CACHE: tl.constexpr,
):
    """``load_row``'s counterpart: a store masked unless ``EVEN``."""
    if EVEN:
        tl.store(ptrs, v, cache_modifier=CACHE)
    else:
        tl.store(ptrs, v, mask=col_ok, cache_modifier=CACHE)
