"""PolyNorm (PolyCom): y = w0 * norm(x^3) + w1 * norm(x^2) + w2 * norm(x) + b, with norm(u) = u / sqrt(mean(u^2)
+ eps) over the last dimension, a weight of three and a scalar bias.

Its workloads were published before the family had a spec, under the generic title and with their inputs
unknown; the spec keeps them byte for byte (``shapes_published=False``): its shapes size the reruns only.
"""

from kernels.spec import spec


def _tensors(p):
    """Liger's LigerPolyNorm and the upstream script's eager layer: x [rows, hidden], a float32 weight [3] and
    a float32 scalar bias (the script moves its layers to the device without casting them)."""
    return {"x": [p["rows"], p["hidden"]], "weight": ("fp32", [3]), "bias": ("fp32", [])}


SPEC = spec("poly_norm", "Poly norm", tensors=_tensors, shapes_published=False)
