"""Normalizations beyond plain RMSNorm and LayerNorm."""

from kernels._spec import spec


def _group_norm(p):
    channels = p["channels"] if "channels" in p else p["hidden"]
    rows = p["rows"] if "rows" in p else p["batch"]
    return {"x": [rows, channels, p["hidden"]], "weight": [channels], "bias": [channels]}


def _dyt(p):
    """Liger's LigerDyT: a scalar alpha, a per-channel gamma, and a per-channel beta only when beta is on."""
    tensors = {"x": [p["tokens"], p["hidden"]], "alpha": [1], "gamma": [p["hidden"]]}
    if p["beta"]:
        tensors["beta"] = [p["hidden"]]
    return tensors


SPECS = [
    spec("dyt", "Dynamic Tanh (DyT)", tensors=_dyt),
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
