"""Code revisions: what source a record was measured with, as the first 12 hex of a sha256 over files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import kernels

HARNESS_ROOT = Path(__file__).parent
KERNELS_ROOT = Path(kernels.__file__).parent


def tree_revision(root: Path) -> str:
    """sha256 over the ``*.py`` files under ``root`` (relative path and content, in path order), 12 hex."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*.py") if "__pycache__" not in p.parts):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def kernel_revision(kernel: str) -> str:
    """The revision of ``kernels/<kernel>/``, the package KernelIndex's implementation of it lives in."""
    return tree_revision(KERNELS_ROOT / kernel)


def harness_revision() -> str:
    """The revision of the harness, ``kernelindex_pipeline/gpu/``, that names a session's evidence file."""
    return tree_revision(HARNESS_ROOT)
