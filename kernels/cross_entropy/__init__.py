"""Cross entropy of logits against integer targets, averaged over tokens."""

from kernels._spec import spec


def _tensors(p):
    tokens = p["tokens"] if "tokens" in p else p["batch"] * p["seq"]
    return {"logits": [tokens, p["vocab"]], "target": ("int64", [tokens])}


SPEC = spec("cross_entropy", "Cross entropy", tensors=_tensors)
