"""Torch helpers shared by the covered kernels' ``impl`` modules (imports torch; never imported by ``kernels``)."""

from __future__ import annotations

import importlib
import os
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

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


def module_available(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except Exception:  # noqa: BLE001 - any import failure means "not available here"
        return False


def package_version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return None


@dataclass
class Built:
    """One provider's pass over a workload.

    ``fn()`` runs the forward pass and returns a tuple of output tensors; ``leaves`` are the tensors
    gradients are taken for (the inputs themselves, or a module's parameters standing for them),
    keyed by input name.
    """

    fn: Callable[[], tuple]
    leaves: dict[str, torch.Tensor]
    label: str
    output_names: tuple[str, ...]
    extra: dict = field(default_factory=dict)


class Unavailable(RuntimeError):
    """A provider cannot run here (package missing, no CUDA for a GPU-only library)."""


def liger_attr(device_tensor: torch.Tensor, module: str, name: str):
    """`name` from `liger_kernel.transformers.<module>`; Unavailable off CUDA or when it cannot be imported."""
    if not device_tensor.is_cuda:
        raise Unavailable("liger_kernel needs a CUDA device")
    try:
        return getattr(importlib.import_module(f"liger_kernel.transformers.{module}"), name)
    except Exception as exc:  # noqa: BLE001 - any import-time failure makes the provider unavailable
        raise Unavailable(f"liger_kernel not importable: {exc}") from exc


def leaf_copies(inputs: Mapping[str, torch.Tensor], names) -> dict[str, torch.Tensor]:
    """Fresh leaf tensors (same values) for the inputs that take gradients, so providers never share grads."""
    return {n: inputs[n].detach().clone().requires_grad_(True) for n in names}


def as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


class CachedLaunch:
    """Launch a Triton JIT kernel, then re-launch its compiled binary directly for the same key.

    Triton's per-call dispatch (argument binding, specialisation, cache lookup) costs tens of
    microseconds on a slow host CPU, which small kernels under autograd pay on every call. After the
    first launch for a key, later launches go straight to the compiled kernel. The key must pin every
    value Triton specialises on: the caller passes the integer arguments, dtypes and constexprs, and
    this class checks pointer alignment (16 bytes) itself. Under TRITON_INTERPRET, or if the direct path
    fails once, every launch takes Triton's ordinary path.
    """

    def __init__(self, jit_fn):
        self.jit_fn = jit_fn
        self.cache: dict = {}
        self.enabled = os.environ.get("TRITON_INTERPRET", "0") not in ("1", "true", "True")

    def __call__(self, grid, key, args: tuple, num_warps: int, tensors=(), max_regs: int | None = None):
        """``max_regs``: a cap on registers per thread (ptxas ``.maxnreg``), so more programs fit on an SM."""
        grid = tuple(grid) + (1,) * (3 - len(grid))
        compiled = self.cache.get(key) if self.enabled else None
        if compiled is not None and all(t.data_ptr() % 16 == 0 for t in tensors):
            try:
                from triton import knobs

                if knobs.runtime.launch_enter_hook is None and knobs.runtime.launch_exit_hook is None:
                    stream = torch._C._cuda_getCurrentRawStream(tensors[0].device.index)
                    compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata,
                                 None, None, None, *args)
                    return
            except Exception:  # noqa: BLE001 - fall back to the ordinary launch from now on
                self.enabled = False
        options = {"maxnreg": max_regs} if max_regs else {}
        out = self.jit_fn[grid](*args, num_warps=num_warps, **options)
        if self.enabled and out is not None and all(t.data_ptr() % 16 == 0 for t in tensors):
            try:
                out._init_handles()
                self.cache[key] = out
            except Exception:  # noqa: BLE001
                pass
