"""Helpers for the other providers an adapter builds: package versions for labels, Liger-Kernel classes."""

from __future__ import annotations

import importlib
from importlib.metadata import version

from kernels._adapter import Unavailable


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except Exception:  # noqa: BLE001 - any metadata failure means "version unknown"
        return None


def liger_attr(device_tensor, module: str, name: str):
    """``name`` from ``liger_kernel.transformers.<module>``; Unavailable off CUDA or when it cannot be imported."""
    if not device_tensor.is_cuda:
        raise Unavailable("liger_kernel needs a CUDA device")
    try:
        return getattr(importlib.import_module(f"liger_kernel.transformers.{module}"), name)
    except Exception as exc:  # noqa: BLE001 - any import-time failure makes the provider unavailable
        raise Unavailable(f"liger_kernel not importable: {exc}") from exc
