"""The kernel library's contracts, checked without a GPU: every covered kernel's ``impl`` module satisfies
``kernels._adapter.RerunAdapter``, every committed launch setting cites evidence that is shipped, and no
module reaches into another's private names.

Kernel modules are imported inside the tests, never at collection, so that the interpreter tests' module
can set TRITON_INTERPRET before triton is first imported.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "data" / "evidence"


def _covered() -> list[str]:
    return sorted(p.parent.name for p in (REPO / "kernels").glob("*/impl.py"))


def test_every_covered_kernel_satisfies_the_adapter_contract():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import kernels
    from kernels._adapter import RerunAdapter, adapter_problems, load_adapter
    from kernelindex_pipeline.gpu.targets import targets_named

    covered = _covered()
    assert covered, "no kernels/*/impl.py found"
    for kernel in covered:
        adapter = load_adapter(kernel)
        assert isinstance(adapter, RerunAdapter)
        assert adapter_problems(adapter) == []
        assert adapter.KERNEL == kernel and kernels.is_known(kernel)
        assert adapter.PROVIDERS and adapter.OUTPUT_NAMES
    assert {t["kernel"] for t in targets_named("all")} <= set(covered)


def test_an_incomplete_adapter_is_refused_with_what_it_lacks(monkeypatch):
    from kernels import _adapter

    module = types.ModuleType("kernels.half_done.impl")
    module.KERNEL = "half_done"
    module.make_inputs = lambda params, dtype, seed: {}
    module.build = 3
    monkeypatch.setattr(_adapter.importlib, "import_module", lambda name: module)
    with pytest.raises(_adapter.AdapterError) as info:
        _adapter.load_adapter("half_done")
    message = str(info.value)
    for name in ("PROVIDERS", "REFERENCE_DTYPE", "reference", "bytes_moved", "flops", "matmul_shapes"):
        assert f"missing {name}" in message
    assert "make_inputs takes (params, dtype, seed), expected (params, dtype, seed, device)" in message
    assert "build is not callable" in message


def test_committed_launch_settings_cite_shipped_evidence():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from kernels.engines.gated_mlp import settings as mlp_settings
    from kernels.engines.norm import settings as norm_settings

    committed = [*norm_settings.FORWARD_SETTINGS.values(), *norm_settings.BACKWARD_SETTINGS.values(),
                 mlp_settings.GLU_TILES, mlp_settings.MLP_ASSEMBLY]
    shipped = {p.name for p in EVIDENCE.glob("*.jsonl.gz")}
    for setting in committed:
        cited = [word.rstrip(":,()") for word in setting.measured_in.split() if word.rstrip(":,()").endswith(".jsonl.gz")]
        assert cited, f"{setting!r} cites no evidence file"
        assert set(cited) <= shipped, f"{setting!r} cites {cited}, not all in data/evidence"


def _sources():
    for root in ("kernels", "kernelindex_pipeline/gpu"):
        yield from sorted((REPO / root).rglob("*.py"))


def test_no_module_imports_another_modules_private_names():
    offenders = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__future__"]
                if private and node.module != "__future__":
                    offenders.append(f"{path.relative_to(REPO)}: from {node.module} import {', '.join(private)}")
    assert offenders == []
