"""What the RMSNorm and LayerNorm rerun adapters share: the workload's eps and the cost model."""

from __future__ import annotations

from collections.abc import Mapping

from kernels._tensors import BYTES_PER_ELEMENT, input_shapes, numel
from kernels.engines.norm.function import DEFAULT_EPS


def workload_eps(params: Mapping[str, object] | None) -> float:
    return float((params or {}).get("eps", DEFAULT_EPS))


def norm_bytes(kernel: str, params, dtype: str, mode: str, n_params: int) -> int:
    """Forward reads x and the parameters, writes y; backward reads dy, x and the parameters, writes dx and
    the parameter gradients; full reads x, parameters, dy once, writes y, dx and the parameter gradients.
    The saved per-row statistics (4-8 bytes a row) are not counted."""
    s = input_shapes(kernel, params)
    e = BYTES_PER_ELEMENT[dtype]
    xb = numel(s["x"]) * e
    pb = n_params * s["x"][-1] * e
    return {"forward": 2 * xb + pb, "backward": 3 * xb + 2 * pb, "full": 4 * xb + 2 * pb}[mode]


def norm_flops(kernel: str, params, mode: str, per_elem_fwd: int, per_elem_bwd: int) -> int:
    n = numel(input_shapes(kernel, params)["x"])
    return {"forward": per_elem_fwd * n, "backward": per_elem_bwd * n, "full": (per_elem_fwd + per_elem_bwd) * n}[mode]
