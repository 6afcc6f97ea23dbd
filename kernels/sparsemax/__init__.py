"""Sparsemax: the Euclidean projection of each row onto the probability simplex."""

from kernels._shapes import tokens
from kernels._spec import spec

SPEC = spec(
    "sparsemax",
    "Sparsemax",
    parameter_names={"V": "cols"},
    tensors=lambda p: {"x": [tokens(p), p["cols"] if "cols" in p else p["hidden"]]},
)
