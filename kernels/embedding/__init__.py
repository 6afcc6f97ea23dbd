"""Embedding: a lookup of token ids into a table of vectors."""

from kernels.spec import spec

SPEC = spec(
    "embedding",
    "Embedding",
    tensors=lambda p: {"indices": ("int64", [p["batch"], p["seq"]]), "weight": [p["vocab"], p["dim"]]},
)
