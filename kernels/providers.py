"""Helpers for the providers an adapter builds: package versions for labels, Liger-Kernel's classes,
torch.compile as upstream's scripts call it."""

from __future__ import annotations

import importlib
import os
from importlib.metadata import version

from kernels.adapter import Unavailable

# Why a Liger provider is unavailable here: its Triton kernels need a GPU, or Triton's CPU interpreter.
LIGER_NEEDS = "liger_kernel runs Triton kernels: needs a CUDA device (or TRITON_INTERPRET=1 on CPU)"


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except Exception:  # noqa: BLE001 - any metadata failure means "version unknown"
        return None


def version_label(name: str) -> str:
    """``package_version`` for a label: "(version unknown)" where it is unknown."""
    found = package_version(name)
    return "(version unknown)" if found is None else found


def liger_attr(device_tensor, module: str, name: str, *, package: str = "liger_kernel.transformers",
               what: str = "liger_kernel"):
    """``name`` from ``<package>.<module>``; Unavailable (``LIGER_NEEDS``) off CUDA unless Triton's CPU
    interpreter is on (TRITON_INTERPRET=1), or (``what`` not importable) when it cannot be imported."""
    if not device_tensor.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise Unavailable(LIGER_NEEDS)
    try:
        return getattr(importlib.import_module(f"{package}.{module}"), name)
    except Exception as exc:  # noqa: BLE001 - any import-time failure makes the provider unavailable
        raise Unavailable(f"{what} not importable: {exc}") from exc


def liger_op(device_tensor, module: str, name: str):
    """The ``name`` autograd Function of Liger-Kernel's ops, as ``liger_kernel.ops`` exports it (where this
    release's dispatch picks the backend: LIGER_KERNEL_IMPL), else from ``liger_kernel.ops.<module>``: a
    release before 0.7.0 exports nothing from ``liger_kernel.ops`` itself."""
    try:
        return liger_attr(device_tensor, "ops", name, package="liger_kernel", what="liger_kernel.ops")
    except Unavailable:
        return liger_attr(device_tensor, module, name, package="liger_kernel.ops", what="liger_kernel.ops")


def liger_label(name: str, how: str = "") -> str:
    """The label of a Liger-Kernel provider: its version, the class or function ``name``, and ``how`` it runs."""
    return f"Liger-Kernel {version_label('liger-kernel')} {name}" + (f" ({how})" if how else "")


def transformers_or(module: str, name: str, equivalent, what: str):
    """(``name`` from Transformers' ``module``, its label), or (``equivalent``, labelled as the PyTorch
    equivalent of ``what``) where Transformers or the name cannot be imported."""
    try:
        found = getattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001 - without Transformers, its arithmetic in PyTorch
        return equivalent, f"PyTorch equivalent of Transformers {what}"
    return found, f"Transformers {version_label('transformers')} {what}"


def fresh_dynamo() -> None:
    """Dynamo's caches and counters reset: what it compiles from here on is compiled afresh, and counted."""
    import torch

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()


def torch_compiled(module, x):
    """``torch.compile(module)`` with default inductor settings, as upstream's scripts build it, compiled
    afresh: dynamo's caches and counters are reset first, so that no recompile count carries over from
    another workload (past its recompile limit dynamo runs eager without an error) and its counters tell
    what this build compiled (``kernelindex_pipeline.gpu.guards``).

    Off CUDA, inductor needs a working C++ toolchain; one forward and backward over ``x`` here compiles both
    graphs, so that a toolchain that cannot build them makes the provider unavailable rather than failed.
    The warm-up's gradients (of ``x`` and the module's parameters) are dropped.
    """
    import torch

    fresh_dynamo()
    compiled = torch.compile(module)
    if not x.is_cuda:
        try:
            compiled(x).sum().backward()
        except Exception as exc:  # noqa: BLE001 - any compile failure means torch.compile cannot run here
            raise Unavailable(f"torch.compile cannot compile on {x.device.type} here: {exc}"[:500]) from exc
        for leaf in (x, *module.parameters()):
            leaf.grad = None
    return compiled

