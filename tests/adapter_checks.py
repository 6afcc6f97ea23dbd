"""What the rerun-adapter test modules (``test_adapters_*.py``) share: Triton's interpreter switched on before
triton is imported, the harness's imports, and the checks each module runs per adapter.

Import this module before anything that imports triton: it sets TRITON_INTERPRET first.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import importlib  # noqa: E402
import importlib.util  # noqa: E402
import logging  # noqa: E402

import pytest  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import kernels  # noqa: E402
from kernels.adapter import Built, Unavailable, adapter_problems, load_adapter  # noqa: E402
from kernelindex_pipeline.gpu.correctness import check_correctness  # noqa: E402

__all__ = [
    "Built", "Unavailable", "adapter_problems", "check_correctness", "kernels", "load_adapter", "torch",
    "SEEDS", "DTYPES", "case_table", "have_liger", "limit_for", "_quiet_liger_backend_probe", "load_checked",
    "seeded_inputs", "assert_seeded_tensor", "check_floors", "assert_passed", "planted", "check_planted",
    "assert_liger_needs_cuda", "reordering_tolerance",
]

SEEDS = (1, 2)
DTYPES = ("fp32", "bf16")


def case_table(cases: dict[str, list[dict]]) -> tuple[list[str], list[tuple[str, dict]], list[str]]:
    """KERNELS, ALL_CASES and CASE_IDS of a {kernel: [params, ...]} table."""
    names = sorted(cases)
    return (names, [(k, p) for k in names for p in cases[k]],
            [f"{k}-{i}" for k in names for i in range(len(cases[k]))])


def reordering_tolerance(dtype: torch.dtype, length: int, scale: float) -> float:
    """How far two summation orders of one computation may leave its results apart in `dtype`.

    Each order's result is within gamma_n = n*u / (1 - n*u) of the exact value, relative to the magnitude
    summed, where u is the dtype's unit roundoff and n the terms summed along the chain of reductions
    (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section 3.1); two orders, twice that.
    `scale` is the magnitude of the results. Tiling, BLAS builds and thread counts all reorder sums, so a
    comparison within this bound holds on any CPU."""
    u = torch.finfo(dtype).eps / 2
    return 2 * length * u / (1 - length * u) * scale


def have_liger() -> bool:
    return importlib.util.find_spec("liger_kernel") is not None


def limit_for(limits: dict, *key):
    """``limits[(*key, None)]`` (a limit at every dtype) or else ``limits[(*key[:-1], dtype)]``, key's last
    item being the dtype."""
    *head, dtype = key
    return limits.get((*head, None)) or limits.get((*head, dtype))


@pytest.fixture(autouse=True, scope="module")
def _quiet_liger_backend_probe():
    """Liger logs every optional backend (cuTile, CuTe DSL, Ascend) it fails to import; none matter here."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def load_checked(kernel: str):
    """The adapter of ``kernel``, satisfying the contract, and the kernel known."""
    impl = load_adapter(kernel)
    assert adapter_problems(impl) == []
    assert kernels.is_known(kernel)
    return impl


def seeded_inputs(impl, kernel: str, params: dict):
    """Inputs at bf16 drawn with seeds 5, 5 and 6, and the spec's input tensors."""
    a = impl.make_inputs(params, "bf16", 5, "cpu")
    b = impl.make_inputs(params, "bf16", 5, "cpu")
    c = impl.make_inputs(params, "bf16", 6, "cpu")
    return a, b, c, kernels.lookup(kernel).input_tensors(params, "bf16")


def assert_seeded_tensor(x, t: dict, same, other, dtype=None) -> None:
    """``x`` has the spec tensor ``t``'s shape and dtype (``dtype``, else bf16 or int64 as ``t`` says), is not
    all zeros, equals ``same`` (the same seed) and differs from ``other`` (another seed)."""
    assert list(x.shape) == t["shape"]
    assert x.dtype == (dtype or (torch.int64 if t["dtype"] == "int64" else torch.bfloat16))
    assert torch.count_nonzero(x) > 0
    assert torch.equal(x, same)
    assert not torch.equal(x, other)


def check_floors(impl, params: dict) -> dict[str, int]:
    """Bytes and FLOPs are positive ints and ``full`` covers each pass; the FLOPs by mode."""
    for dtype in ("bf16", "fp32"):
        b = {m: impl.bytes_moved(params, dtype, m) for m in ("forward", "backward", "full")}
        assert all(isinstance(v, int) and v > 0 for v in b.values())
        assert b["full"] >= max(b["forward"], b["backward"])
    f = {m: impl.flops(params, m) for m in ("forward", "backward", "full")}
    assert all(isinstance(v, int) and v > 0 for v in f.values())
    assert f["full"] == f["forward"] + f["backward"]
    return f


def assert_passed(impl, provider: str, res: dict) -> None:
    assert res["status"] == "passed", (provider, res.get("reason"))
    assert set(res["outputs"]) == set(impl.OUTPUT_NAMES)
    assert set(res["gradients"]) == set(impl.GRAD_INPUTS)
    assert res["label"]


def planted(impl, provider: str, how: str):
    """A ``build`` whose ``provider`` pass is wrong: outputs scaled 1.05 ("outputs"), or the outputs right but
    their gradients scaled 1.5 ("gradients")."""

    def build(name, inputs, params):
        built = impl.build(name, inputs, params)
        if name != provider:
            return built

        def fn():
            outs = built.fn()
            if how == "outputs":
                return tuple(o * 1.05 for o in outs)
            return tuple(o.detach() + (o - o.detach()) * 1.5 for o in outs)

        return Built(fn, built.leaves, "planted", built.output_names)

    return build


def check_planted(impl, provider: str, params: dict, how: str) -> None:
    """The harness's comparison fails ``provider`` planted wrong (see ``planted``), naming what differs."""
    res = check_correctness(impl, [provider], params, "fp32", "cpu", seeds=(1,),
                            build=planted(impl, provider, how))[provider]
    assert res["status"] == "failed"
    kind = "output" if how == "outputs" else "gradient"
    assert f"{kind} " in res["reason"] and "rel_error" in res["reason"]


def assert_liger_needs_cuda(impl, providers, params: dict, monkeypatch, inputs=None) -> None:
    """Without TRITON_INTERPRET, building each of ``providers`` on the CPU raises Unavailable naming CUDA."""
    if inputs is None:
        inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    monkeypatch.delenv("TRITON_INTERPRET")
    for provider in providers:
        with pytest.raises(Unavailable, match="CUDA"):
            impl.build(provider, inputs, params)
