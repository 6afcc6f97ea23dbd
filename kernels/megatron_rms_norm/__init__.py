"""RMSNorm in Megatron-LM's layout: x [seq, batch, hidden], normalized over hidden."""

from kernels.spec import spec

SPEC = spec(
    "megatron_rms_norm",
    "RMSNorm (Megatron-LM layout)",
    tensors=lambda p: {"x": [p["seq"], p["batch"], p["hidden"]], "weight": [p["hidden"]]},
    script_dtype="bf16",
)
