"""Rotary position embedding (Llama style, cos/sin tables) applied to q and k."""

from kernels.spec import spec


def _tensors(p):
    head_dim = p["hidden"] // p["q_heads"]
    return {
        "q": [p["batch"], p["q_heads"], p["seq"], head_dim],
        "k": [p["batch"], p["kv_heads"], p["seq"], head_dim],
        "cos": [1, p["seq"], head_dim],
        "sin": [1, p["seq"], head_dim],
    }


SPEC = spec("rope", "Rotary position embedding", defaults={"batch": 1}, tensors=_tensors)
