"""Sparsemax: the Euclidean projection of each row onto the probability simplex."""

from kernels.shapes import tokens
from kernels.spec import spec

SPEC = spec(
    "sparsemax",
    "Sparsemax",
    parameter_names={"V": "cols"},
    tensors=lambda p: {"x": [tokens(p), p["cols"] if "cols" in p else p["hidden"]]},
)
