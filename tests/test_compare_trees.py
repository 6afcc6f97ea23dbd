"""The developer tool `tools/compare_trees.py` loads another checkout's kernels beside this tree's, without mixing
the two."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tools.compare_trees import load_baseline_kernels  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_the_baseline_tree_is_its_own_package(tmp_path):
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "kernels", checkout / "kernels")
    # A marker only the baseline copy has: its modules must be the ones imported under the new name.
    (checkout / "kernels" / "tensors.py").write_text(
        (checkout / "kernels" / "tensors.py").read_text() + "\nBASELINE_MARKER = True\n")
    package = load_baseline_kernels(checkout, tmp_path / "scratch")
    try:
        baseline = importlib.import_module(f"{package}.rope.impl")
        own = importlib.import_module("kernels.rope.impl")
        assert baseline is not own
        assert importlib.import_module(f"{package}.tensors").BASELINE_MARKER
        assert not hasattr(importlib.import_module("kernels.tensors"), "BASELINE_MARKER")
        loaded = [name for name, module in sys.modules.items()
                  if name.startswith(f"{package}.") and getattr(module, "__file__", None)]
        assert loaded and all(str(tmp_path / "scratch") in sys.modules[name].__file__ for name in loaded)
    finally:
        sys.path.remove(str(tmp_path / "scratch"))
        for name in [n for n in sys.modules if n == package or n.startswith(f"{package}.")]:
            del sys.modules[name]



def test_the_side_by_side_adapter_answers_as_this_trees_adapter_beyond_its_two_providers():
    """The harness asks an adapter more than its inputs and builds (its outputs, its leaves, whether its backward
    consumes its graph): the side-by-side adapter answers those as this tree's adapter does."""
    from kernels.adapter import load_adapter
    from tools.compare_trees import SideBySide

    own = load_adapter("megatron_cross_entropy")
    both = SideBySide(own, load_adapter("rms_norm"))
    assert both.BACKWARD_CONSUMES_GRAPH is own.BACKWARD_CONSUMES_GRAPH is True
    assert both.OUTPUT_NAMES == own.OUTPUT_NAMES and both.GRAD_INPUTS == own.GRAD_INPUTS
