"""Dynamic Tanh (DyT): y = gamma * tanh(alpha * x) + beta, a normalization-free stand-in for LayerNorm."""

from kernels.spec import spec


def _tensors(p):
    """Liger's LigerDyT: a scalar alpha, a per-channel gamma, and a per-channel beta only when beta is on."""
    tensors = {"x": [p["tokens"], p["hidden"]], "alpha": [1], "gamma": [p["hidden"]]}
    if p["beta"]:
        tensors["beta"] = [p["hidden"]]
    return tensors


SPEC = spec("dyt", "Dynamic Tanh (DyT)", tensors=_tensors)
