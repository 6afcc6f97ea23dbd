"""Per-kernel knowledge: one package per kernel family, collected into one registry.

``kernels/<family>/__init__.py`` holds the family's ``SPEC`` (canonical parameter names, title, input
shapes; no torch) and ``kernels/<family>/impl.py`` its rerun adapter, ``ADAPTER`` (``kernels.adapter``),
which only the GPU rerun code imports. What several families share lives in the base modules
(``kernels._*``) and in the engines (``kernels/engines/``); a family imports those, never another family.
"""

from __future__ import annotations

import importlib
import pkgutil

from kernels.spec import COMMON_PARAMETER_NAMES, DISPLAY_ORDER, DTYPE_BYTES, DTYPE_NAMES, KernelSpec, spec

ENGINES = "engines"

# Every family package's name, in name order.
FAMILIES: tuple[str, ...] = tuple(sorted(
    info.name for info in pkgutil.iter_modules(__path__) if info.ispkg and info.name != ENGINES))

REGISTRY: dict[str, KernelSpec] = {
    name: importlib.import_module(f"{__name__}.{name}").SPEC for name in FAMILIES
}


def lookup(kernel: str) -> KernelSpec:
    """The spec of a kernel; an unknown kernel gets a generic one (common names, shapes unknown)."""
    return REGISTRY.get(kernel) or spec(kernel, kernel.replace("_", " ").capitalize())


def is_known(kernel: str) -> bool:
    return kernel in REGISTRY


__all__ = ["COMMON_PARAMETER_NAMES", "DISPLAY_ORDER", "DTYPE_BYTES", "DTYPE_NAMES", "FAMILIES", "KernelSpec",
           "REGISTRY", "is_known", "lookup"]
