"""What KernelIndex knows about one indexed kernel, in plain Python (no torch).

A spec turns the upstream benchmark's parameter names into canonical ones, names the kernel for people,
and lists the tensors a pass takes for a workload. Ingestion only needs this; the rerun code that
builds real tensors lives in each covered kernel's ``impl`` module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# Canonical names for the parameter names the Liger-Kernel benchmark scripts use across kernels.
# A kernel overrides one of these when its scripts mean something else by the same letter.
COMMON_PARAMETER_NAMES: Mapping[str, str] = {
    "bsz": "batch",
    "B": "batch",
    "batch_size": "batch",
    "T": "seq",
    "seq_len": "seq",
    "S": "seq",
    "L": "seq",
    "H": "hidden",
    "hidden_size": "hidden",
    "num_q_heads": "q_heads",
    "num_attention_heads": "q_heads",
    "num_heads": "heads",
    "num_kv_heads": "kv_heads",
    "num_key_value_heads": "kv_heads",
    "intermediate_size": "intermediate",
    "intermediate_dim": "intermediate",
    "V": "vocab",
    "vocab_size": "vocab",
    "BT": "tokens",
    "M": "rows",
    "N": "cols",
    "D": "dim",
    "E": "experts",
    "C": "channels",
    "TP": "tensor_parallel",
    "model_config": "model",
}

# Parameters shown first, in this order, when a workload is written for people; the rest follow by name.
DISPLAY_ORDER: tuple[str, ...] = (
    "model", "seq", "batch", "tokens", "rows", "cols", "hidden", "intermediate",
    "q_heads", "kv_heads", "heads", "vocab", "dim", "channels", "experts",
)

DTYPE_NAMES: Mapping[str, str] = {
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.half": "fp16",
    "torch.float32": "fp32",
    "torch.float": "fp32",
    "torch.float64": "fp64",
    "torch.float8_e4m3fn": "fp8e4m3",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float32": "fp32",
}

# Bytes per element of each dtype name a spec or an adapter uses.
DTYPE_BYTES: Mapping[str, int] = {
    "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "int64": 8, "int32": 4, "int8": 1, "bool": 1, "complex64": 8,
}

# Parameters -> {tensor name: shape}, or {tensor name: (dtype, shape)} for a tensor whose dtype is not the
# workload's own (integer targets, say).
TensorShapes = Callable[[Mapping[str, object]], Mapping[str, object]]


@dataclass(frozen=True)
class KernelSpec:
    """Per-kernel knowledge for ingestion: names, parameters, input tensors."""

    name: str
    title: str
    parameter_names: Mapping[str, str] = field(default_factory=dict)
    # Parameters that only restate the kernel (GeGLU's activation, say): kept in the workload
    # definition, left out of the workload slug.
    implied: tuple[str, ...] = ()
    # Canonical parameters the tensor shapes need that the source leaves out, with the value the
    # source's harness uses.
    defaults: Mapping[str, object] = field(default_factory=dict)
    tensors: TensorShapes | None = None
    # The dtype the source's benchmark script builds its tensors in where its runs record none: torch's
    # default float32 unless the script says otherwise (Megatron's scripts run bfloat16).
    script_dtype: str = "fp32"
    # The relative tolerance, by dtype, of the kernel's own upstream tests where it is looser than the rerun
    # protocol's fixed one: the field's correctness rule accepts an error within it (gpu.protocol.field_failures).
    test_tolerances: Mapping[str, float] = field(default_factory=dict)
    # Whether published workload definitions state the input tensors. A family whose workloads were published
    # before it had a spec keeps them as published ("inputs": "unknown"): its shapes size its reruns only.
    shapes_published: bool = True
    # Parameters an older revision of the source's script fixed without its runs naming them (Qwen2-VL
    # M-RoPE's batch of 1 before upstream's benchmark refactor): they size and build the reruns of such
    # workloads, never a published definition, whose inputs stay "unknown".
    harness_defaults: Mapping[str, object] = field(default_factory=dict)

    def canonical(self, source_name: str) -> str:
        """Canonical name of a source parameter name for this kernel."""
        if source_name in self.parameter_names:
            return self.parameter_names[source_name]
        return COMMON_PARAMETER_NAMES.get(source_name, source_name)

    def input_tensors(self, params: Mapping[str, object], dtype: str | None) -> list[dict] | None:
        """The input tensors of a workload as [{name, dtype, shape}], or None when unknown."""
        if self.tensors is None:
            return None
        try:
            described = self.tensors({**self.defaults, **params})
            tensors = []
            for name, entry in described.items():
                tensor_dtype, shape = entry if isinstance(entry, tuple) else (dtype, entry)
                tensors.append({"name": name, "dtype": tensor_dtype or "unknown", "shape": [int(d) for d in shape]})
            return tensors
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return None


    def rerun_tensors(self, params: Mapping[str, object], dtype: str | None) -> list[dict] | None:
        """The input tensors a rerun builds: ``input_tensors`` with the harness's unnamed parameters."""
        return self.input_tensors({**self.harness_defaults, **params}, dtype)


def spec(name: str, title: str, **kwargs) -> KernelSpec:
    return KernelSpec(name=name, title=title, **kwargs)
