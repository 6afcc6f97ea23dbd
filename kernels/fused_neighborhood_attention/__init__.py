"""Fused neighborhood attention: each query attends only to the keys within a (dilated) window around it."""

from kernels.spec import spec


def _tensors(p):
    head_dim = p["hidden"] // p["heads"]
    shape = [p["batch"], p["heads"], p["seq"], head_dim]
    return {"q": shape, "k": shape, "v": shape}


SPEC = spec("fused_neighborhood_attention", "Fused neighborhood attention", tensors=_tensors)
