"""Llama 4 rotary position embedding: q and k rotated by complex frequencies, in place of the usual cos/sin."""

from kernels.spec import spec


def _tensors(p):
    head_dim = p["hidden"] // p["q_heads"]
    return {
        "k": [p["batch"], p["seq"], p["kv_heads"], head_dim],
        "q": [p["batch"], p["seq"], p["q_heads"], head_dim],
    }


SPEC = spec(
    "llama4_rope",
    "Llama 4 rotary position embedding",
    defaults={"batch": 1},
    tensors=_tensors,
)
