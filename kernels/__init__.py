"""Per-kernel knowledge: one module per kernel family, collected into one registry.

Importing this package needs no torch; the rerun implementations live in each covered kernel's
``impl`` module and are imported only by the GPU rerun code.
"""

from __future__ import annotations

from kernels import attention, gated_mlps, losses, misc, norms, rope_variants
from kernels._spec import COMMON_PARAMETER_NAMES, DISPLAY_ORDER, DTYPE_NAMES, KernelSpec, spec
from kernels.cross_entropy import SPEC as CROSS_ENTROPY
from kernels.geglu import SPEC as GEGLU
from kernels.layer_norm import SPEC as LAYER_NORM
from kernels.llama4_rope import SPEC as LLAMA4_ROPE
from kernels.rms_norm import SPEC as RMS_NORM
from kernels.rope import SPEC as ROPE
from kernels.softmax import SPEC as SOFTMAX
from kernels.swiglu import SPEC as SWIGLU

REGISTRY: dict[str, KernelSpec] = {
    s.name: s
    for s in [
        LLAMA4_ROPE, ROPE, GEGLU, SWIGLU, RMS_NORM, LAYER_NORM, SOFTMAX, CROSS_ENTROPY,
        *rope_variants.SPECS, *gated_mlps.SPECS, *norms.SPECS, *losses.SPECS, *attention.SPECS, *misc.SPECS,
    ]
}


def lookup(kernel: str) -> KernelSpec:
    """The spec of a kernel; an unknown kernel gets a generic one (common names, shapes unknown)."""
    return REGISTRY.get(kernel) or spec(kernel, kernel.replace("_", " ").capitalize())


def is_known(kernel: str) -> bool:
    return kernel in REGISTRY


__all__ = ["COMMON_PARAMETER_NAMES", "DISPLAY_ORDER", "DTYPE_NAMES", "KernelSpec", "REGISTRY", "is_known", "lookup"]
