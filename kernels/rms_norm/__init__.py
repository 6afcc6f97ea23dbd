"""RMSNorm over the last dimension, with a learned scale."""

from kernels.spec import spec

SPEC = spec(
    "rms_norm",
    "RMSNorm",
    tensors=lambda p: {"x": [p["rows"], p["hidden"]], "weight": [p["hidden"]]},
)
