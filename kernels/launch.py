"""Launching KernelIndex's Triton kernels: a cached direct launch, and the device facts launch rules read."""

from __future__ import annotations

import os

import torch

# Off CUDA (Triton's CPU interpreter) the launch rules size grids as for a GPU of this many SMs: several
# programs, so that the CPU tests cover sums over programs, and few, so that the interpreter stays quick.
INTERPRETER_SM_COUNT = 4

_CUDA_PROPERTIES: dict = {}


def cuda_properties(device: torch.device):
    """A CUDA device's properties, read once per device (launch rules consult them on every call)."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _CUDA_PROPERTIES:
        _CUDA_PROPERTIES[idx] = torch.cuda.get_device_properties(idx)
    return _CUDA_PROPERTIES[idx]


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of ``device``; INTERPRETER_SM_COUNT off CUDA."""
    return cuda_properties(device).multi_processor_count if device.type == "cuda" else INTERPRETER_SM_COUNT


class CachedLaunch:
    """Launch a Triton JIT kernel, then re-launch its compiled binary directly for the same key.

    Triton's per-call dispatch (argument binding, specialisation, cache lookup) costs tens of
    microseconds on a slow host CPU, which small kernels under autograd pay on every call. After the
    first launch for a key, later launches go straight to the compiled kernel. The key must pin every
    value Triton specialises on: the caller passes the integer arguments, dtypes and constexprs (or a
    launch-setting record holding them), and this class checks pointer alignment (16 bytes) itself.
    Under TRITON_INTERPRET, or if the direct path fails once, every launch takes Triton's ordinary path.
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
            except Exception:  # noqa: BLE001 - the kernel stays on Triton's ordinary path
                pass
