"""Torch helpers the rerun adapters share: dtypes, seeded inputs, shapes from the spec, leaf copies.

Imports torch, so only the GPU rerun code and the adapters import it (never ``kernels`` itself).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

import kernels
from kernels.adapter import Built
from kernels.spec import DTYPE_BYTES

# The dtype names a rerun takes (half and single precision) and their sizes; another name raises KeyError.
RERUN_DTYPES: Mapping[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
RERUN_BYTES: Mapping[str, int] = {name: DTYPE_BYTES[name] for name in RERUN_DTYPES}


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


class Draws:
    """Seeded inputs of one workload: the spec's ``shapes``, one generator ``gen`` seeded with the seed (every
    draw advances it, so their order is part of the inputs), the run's ``dtype``, and ``dtypes``, the floating
    dtypes the spec names for some inputs (PolyNorm's float32 parameters)."""

    def __init__(self, kernel: str, params: Mapping[str, object], dtype: str, seed: int, device):
        tensors = _described(kernel, params)
        self.shapes = {t["name"]: t["shape"] for t in tensors}
        self.dtypes = {t["name"]: RERUN_DTYPES[t["dtype"]] for t in tensors if t["dtype"] in RERUN_DTYPES}
        self.gen = generator(seed, device)
        self.dtype = RERUN_DTYPES[dtype]
        self.device = device

    def normal(self, name: str, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
        """The input ``name`` drawn from a normal distribution (``randn``), in its spec's dtype where the spec
        names one, else the run's."""
        return randn(self.shapes[name], self.dtypes.get(name, self.dtype), self.gen, self.device, scale, shift)


# The upstream gradients are drawn from a generator of their own, seeded this far from the check's seed,
# so that they never repeat the values of the inputs (drawn from the seed itself); a prime far from the
# protocol's small seeds, so that no check's gradients reuse another check's inputs either.
GRAD_SEED_OFFSET = 7919


def grad_outputs(outputs, seed: int):
    """Seeded upstream gradients, one per output, in the outputs' shapes and dtypes."""
    gen = generator(seed + GRAD_SEED_OFFSET, outputs[0].device)
    return tuple(randn(o.shape, o.dtype, gen, o.device) for o in outputs)


def numel(shape) -> int:
    return int(math.prod(int(d) for d in shape))


def input_shapes(kernel: str, params: Mapping[str, object], shown=None) -> dict[str, list[int]]:
    """{input name: shape} of a workload, as the kernel's spec describes its inputs; a ValueError naming the
    parameters (``shown``, else ``params``) where the spec gives none for them."""
    return {t["name"]: t["shape"] for t in _described(kernel, params, shown)}


def _described(kernel: str, params: Mapping[str, object], shown=None) -> list[dict]:
    """The spec's input tensors of a workload ([{name, dtype, shape}], dtype ``unknown`` where the spec leaves it
    to the run), or the ValueError ``input_shapes`` raises."""
    tensors = kernels.lookup(kernel).rerun_tensors(params, None)
    if tensors is None:
        named = dict(params if shown is None else shown)
        raise ValueError(f"{kernel}: the spec gives no input shapes for parameters {named}")
    return tensors


def leaf_copies(inputs: Mapping[str, torch.Tensor], names) -> dict[str, torch.Tensor]:
    """Fresh leaf tensors (same values) for the inputs that take gradients, so providers never share grads."""
    return {n: inputs[n].detach().clone().requires_grad_(True) for n in names}


def leaf(tensor: torch.Tensor) -> torch.Tensor:
    """A fresh leaf copy of one input, so providers never share its gradient."""
    return tensor.detach().clone().requires_grad_(True)


def module_pass(module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], weights, label: str,
                output_names: tuple[str, ...], x: str = "x") -> Built:
    """A pass of ``module`` over a fresh leaf copy of ``inputs[x]``: the module moved to that input's device and
    dtype, its parameters ``weights`` holding the inputs of those names, and standing for them as leaves."""
    module = module.to(device=inputs[x].device, dtype=inputs[x].dtype)
    with torch.no_grad():
        for name in weights:
            getattr(module, name).copy_(inputs[name])
    x_leaf = leaf(inputs[x])
    leaves = {x: x_leaf, **{name: getattr(module, name) for name in weights}}
    return Built(lambda: (module(x_leaf),), leaves, label, output_names)


def as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def per_mode(forward: int, backward: int, mode: str) -> int:
    """A pass's figure from its forward and backward ones: ``full`` is both."""
    return {"forward": forward, "backward": backward, "full": forward + backward}[mode]

