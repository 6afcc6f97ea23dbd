"""Normalizations beyond plain RMSNorm and LayerNorm."""

from kernels._spec import spec


def _group_norm(p):
    channels = p["channels"] if "channels" in p else p["hidden"]
    rows = p["rows"] if "rows" in p else p["batch"]
    return {"x": [rows, channels, p["hidden"]], "weight": [channels], "bias": [channels]}


SPECS = [
    spec(
        "fused_add_rms_norm",
        "Fused residual add + RMSNorm",
        tensors=lambda p: {"x": [p["rows"], p["hidden"]], "residual": [p["rows"], p["hidden"]], "weight": [p["hidden"]]},
    ),
    spec("group_norm", "GroupNorm", tensors=_group_norm),
    spec(
        "megatron_rms_norm",
        "RMSNorm (Megatron-LM layout)",
        tensors=lambda p: {"x": [p["seq"], p["batch"], p["hidden"]], "weight": [p["hidden"]]},
    ),
]
