"""Fused residual add + RMSNorm: s = x + residual, y = RMSNorm(s), both returned."""

from kernels.spec import spec

SPEC = spec(
    "fused_add_rms_norm",
    "Fused residual add + RMSNorm",
    tensors=lambda p: {"x": [p["rows"], p["hidden"]], "residual": [p["rows"], p["hidden"]], "weight": [p["hidden"]]},
)
