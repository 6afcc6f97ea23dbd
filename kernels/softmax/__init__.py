"""Softmax over the last dimension of an M x N matrix."""

from kernels.spec import spec

SPEC = spec("softmax", "Softmax", tensors=lambda p: {"x": [p["rows"], p["cols"]]})
