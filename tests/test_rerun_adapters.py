"""The kernel library's contracts, checked without a GPU: every family has the one shape (its ``SPEC`` in
``kernels/<family>/__init__.py``, its ``ADAPTER``, an ``kernels.adapter.Adapter``, in ``impl.py``, satisfying
``RerunAdapter``), families import only the base modules and the engines, every committed launch setting
cites evidence that is shipped, and no module reaches into another's private names.

Kernel modules are imported inside the tests, never at collection, so that the interpreter tests' module
can set TRITON_INTERPRET before triton is first imported.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "data" / "evidence"


KERNELS = REPO / "kernels"


def _family_folders() -> list[str]:
    """Every folder of ``kernels/`` with Python in it, but the engines'."""
    return sorted(p.name for p in KERNELS.iterdir()
                  if p.is_dir() and p.name != "engines" and any(p.glob("*.py")))


def _kernels_imported(path: Path) -> set[str]:
    """The ``kernels.<name>`` packages and modules a file imports, by their first name under ``kernels``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module] if node.module != "kernels" else [f"kernels.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            continue
        names |= {m.split(".")[1] for m in modules if m.startswith("kernels.")}
    return names


def test_every_family_has_the_one_shape():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import kernels
    from kernels.adapter import Adapter, RerunAdapter, adapter_problems, load_adapter
    from kernelindex_pipeline.gpu.targets import targets_named

    families = _family_folders()
    assert list(kernels.FAMILIES) == families and len(families) == 38
    for family in families:
        spec = importlib.import_module(f"kernels.{family}").SPEC
        assert spec is kernels.lookup(family) and spec.name == family
        adapter = importlib.import_module(f"kernels.{family}.impl").ADAPTER
        assert isinstance(adapter, Adapter) and isinstance(adapter, RerunAdapter)
        assert load_adapter(family) is adapter and adapter_problems(adapter) == []
        assert adapter.PROVIDERS and adapter.OUTPUT_NAMES and set(adapter.PROVIDERS) <= set(adapter.BUILDERS)
    assert {t["kernel"] for t in targets_named("all")} <= set(families)


def test_families_import_only_the_base_modules_and_engines():
    families = set(_family_folders())
    reaching = {}
    for family in families:
        for path in (KERNELS / family).glob("*.py"):
            if others := _kernels_imported(path) & (families - {family}):
                reaching[str(path.relative_to(REPO))] = sorted(others)
    for path in (KERNELS / "engines").rglob("*.py"):
        if others := _kernels_imported(path) & families:
            reaching[str(path.relative_to(REPO))] = sorted(others)
    assert reaching == {}


def test_the_base_gives_the_defaults_once():
    """No family or engine restates a default of ``Adapter`` (no implied parameters, no deterministic inputs,
    no GEMMs, the unknown-provider error)."""
    restated = []
    for path in KERNELS.rglob("*.py"):
        if path.name == "adapter.py" and path.parent == KERNELS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                empty = isinstance(node.value, (ast.Dict, ast.Tuple)) and not (
                    node.value.keys if isinstance(node.value, ast.Dict) else node.value.elts)
                if names & {"IMPLIED", "DETERMINISTIC_INPUTS"} and empty:
                    restated.append(where)
            elif isinstance(node, ast.FunctionDef) and node.name == "matmul_shapes":
                body = [n for n in node.body if not isinstance(n, ast.Expr)]
                if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.List) \
                        and not body[0].value.elts:
                    restated.append(where)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "unknown provider" in node.value:
                restated.append(where)
    assert restated == []


class _HalfDone:
    """An adapter missing most of the contract, one function taking the wrong parameters, ``build`` not a
    function."""

    KERNEL = "half_done"
    build = 3

    def make_inputs(self, params, dtype, seed):
        return {}


def test_an_incomplete_adapter_is_refused_with_what_it_lacks():
    from kernels.adapter import adapter_problems

    problems = adapter_problems(_HalfDone())
    for name in ("PROVIDERS", "REFERENCE_DTYPE", "reference", "bytes_moved", "flops", "matmul_shapes"):
        assert f"missing {name}" in problems
    assert "make_inputs takes (params, dtype, seed), expected (params, dtype, seed, device)" in problems
    assert "build is not callable" in problems


def test_an_adapter_without_a_builder_for_a_provider_is_refused():
    from kernels.adapter import Adapter, adapter_problems

    class Unbuilt(Adapter):
        PROVIDERS = ("liger", "torch")
        BUILDERS = {"torch": lambda adapter, provider, inputs, params: None}

    assert "no builder for liger" in adapter_problems(Unbuilt())


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
