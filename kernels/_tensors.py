"""Torch helpers the rerun adapters share: dtype names, seeded inputs, shapes from the spec, leaf copies.

Imports torch, so only the GPU rerun code and the adapters import it (never ``kernels`` itself).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

import kernels

TORCH_DTYPES: Mapping[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
    "fp64": torch.float64,
}

BYTES_PER_ELEMENT: Mapping[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "int64": 8, "complex64": 8}


def torch_dtype(name: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise ValueError(f"unsupported dtype name {name!r}; expected one of {sorted(TORCH_DTYPES)}") from None


def generator(seed: int, device) -> torch.Generator:
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen


def randn(shape, dtype: torch.dtype, gen: torch.Generator, device, scale: float = 1.0, shift: float = 0.0):
    """Seeded normal values (never all zeros), drawn in float32 then cast."""
    t = torch.randn(tuple(int(d) for d in shape), generator=gen, device=device, dtype=torch.float32)
    if scale != 1.0:
        t.mul_(scale)
    if shift != 0.0:
        t.add_(shift)
    return t.to(dtype)


def numel(shape) -> int:
    return int(math.prod(int(d) for d in shape))


def input_shapes(kernel: str, params: Mapping[str, object]) -> dict[str, list[int]]:
    """{input name: shape} of a workload, as the kernel's spec describes its inputs."""
    return {t["name"]: t["shape"] for t in kernels.lookup(kernel).input_tensors(params, None)}


def leaf_copies(inputs: Mapping[str, torch.Tensor], names) -> dict[str, torch.Tensor]:
    """Fresh leaf tensors (same values) for the inputs that take gradients, so providers never share grads."""
    return {n: inputs[n].detach().clone().requires_grad_(True) for n in names}


def as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


# The dtype names the Liger-benchmark rerun adapters take (half and single precision, no fp64), and their
# sizes; indexing either with another name raises KeyError.
RERUN_DTYPES: Mapping[str, torch.dtype] = {name: TORCH_DTYPES[name] for name in ("bf16", "fp16", "fp32")}
RERUN_BYTES: Mapping[str, int] = {name: BYTES_PER_ELEMENT[name] for name in RERUN_DTYPES}


def required_input_shapes(kernel: str, params: Mapping[str, object], shown=None) -> dict[str, list[int]]:
    """``input_shapes``, but a ValueError naming the parameters (``shown``, else ``params``) where the spec
    gives none for them."""
    tensors = kernels.lookup(kernel).input_tensors(params, None)
    if tensors is None:
        named = dict(params if shown is None else shown)
        raise ValueError(f"{kernel}: the spec gives no input shapes for parameters {named}")
    return {t["name"]: t["shape"] for t in tensors}
