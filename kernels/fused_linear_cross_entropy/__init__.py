"""Fused linear cross entropy: the LM head projection and the cross-entropy loss without materialized logits."""

from kernels.shapes import tokens
from kernels.spec import spec


def _tensors(p):
    return {"x": [tokens(p), p["hidden"]], "weight": [p["vocab"], p["hidden"]], "target": ("int64", [tokens(p)])}


SPEC = spec("fused_linear_cross_entropy", "Fused linear cross entropy", tensors=_tensors)
