"""LayerNorm over the last dimension, with learned scale and shift."""

from kernels.spec import spec


def _tensors(p):
    rows = p["rows"] if "rows" in p else p["batch"] * p["seq"]
    return {"x": [rows, p["hidden"]], "weight": [p["hidden"]], "bias": [p["hidden"]]}


# The benchmark sweeps N, the hidden size, over M rows.
SPEC = spec("layer_norm", "LayerNorm", parameter_names={"N": "hidden"}, tensors=_tensors)
