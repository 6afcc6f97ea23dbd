"""Megatron-LM vocab-parallel cross entropy: the per-token loss of logits in Megatron-LM's [seq, batch, vocab]
layout."""

from kernels.spec import spec

SPEC = spec(
    "megatron_cross_entropy",
    "Cross entropy (Megatron-LM vocab-parallel)",
    tensors=lambda p: {"logits": [p["seq"], p["batch"], p["vocab"]], "target": ("int64", [p["seq"], p["batch"]])},
    script_dtype="bf16",
)
