"""GroupNorm: normalization over groups of channels, with a per-channel scale and shift."""

from kernels.spec import spec


def _tensors(p):
    channels = p["channels"] if "channels" in p else p["hidden"]
    rows = p["rows"] if "rows" in p else p["batch"]
    return {"x": [rows, channels, p["hidden"]], "weight": [channels], "bias": [channels]}


SPEC = spec("group_norm", "GroupNorm", tensors=_tensors)
