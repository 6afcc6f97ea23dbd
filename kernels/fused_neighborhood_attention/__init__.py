"""Fused neighborhood attention: each query attends only to the keys within a (dilated) window around it."""

from kernels.spec import spec


def _tensors(p):
    head_dim = p["hidden"] // p["heads"]
    shape = [p["batch"], p["heads"], p["seq"], head_dim]
    return {"q": shape, "k": shape, "v": shape}


# Liger-Kernel's test/transformers/test_fused_neighborhood_attention.py compares with atol = rtol = 5e-3 in
# float32 (its tl.dot runs TF32, Triton's default) and 5e-2 in bfloat16.
SPEC = spec("fused_neighborhood_attention", "Fused neighborhood attention", tensors=_tensors,
            test_tolerances={"fp32": 5e-3, "bf16": 5e-2})
