"""Qwen2-VL multimodal rotary position embedding (M-RoPE): temporal, height and width sections of RoPE.

Upstream's script drew q and k with a batch of 1 until its benchmark refactor and did not name it in its runs;
those workloads' published inputs stay unknown and their reruns build that batch (``harness_defaults``)."""

from kernels.spec import spec


def _tensors(p):
    head_dim = p["hidden"] // p["q_heads"]
    return {
        "q": [p["batch"], p["q_heads"], p["seq"], head_dim],
        "k": [p["batch"], p["kv_heads"], p["seq"], head_dim],
        "cos": [3, 1, p["seq"], head_dim],
        "sin": [3, 1, p["seq"], head_dim],
    }


SPEC = spec("qwen2vl_mrope", "Qwen2-VL multimodal rotary position embedding", tensors=_tensors,
            harness_defaults={"batch": 1})
