"""Cross entropy of logits against integer targets, averaged over tokens."""

from kernels.shapes import tokens
from kernels.spec import spec


def _tensors(p):
    return {"logits": [tokens(p), p["vocab"]], "target": ("int64", [tokens(p)])}


SPEC = spec("cross_entropy", "Cross entropy", tensors=_tensors)
