"""Squared ReLU: relu(x) ** 2, elementwise."""

from kernels.spec import spec

SPEC = spec("relu_squared", "Squared ReLU", tensors=lambda p: {"x": [p["rows"], p["hidden"]]},
            parameter_names={"N": "hidden"})
