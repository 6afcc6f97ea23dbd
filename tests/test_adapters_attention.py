"""Rerun adapters of fused neighborhood attention, multi-token attention and sparse multi-token attention,
on the CPU: each satisfies the adapter contract, draws seeded inputs in the spec's shapes, and every
provider that runs here matches the float64 reference (outputs and gradients) through the harness's own
correctness check, which also catches a planted wrong provider.

Liger's providers run under Triton's CPU interpreter; where the interpreter cannot run Liger's kernel the
test says why in its skip reason, and a separate test shows the limit still holds. TRITON_INTERPRET must be
set before triton is imported, so this module imports ``adapter_checks``, which sets it, first.
"""

from __future__ import annotations

import adapter_checks as ac  # first: sets TRITON_INTERPRET before triton is imported
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from adapter_checks import (  # noqa: F401 (the autouse fixture)
    DTYPES,
    SEEDS,
    Unavailable,
    _quiet_liger_backend_probe,
    check_correctness,
    load_adapter,
    torch,
)

# Small shapes: sequences that are not powers of two (so Liger's blocks have masked tails), windows cut at
# both ends of the sequence, a dilated window, grouped convolutions.
CASES = {
    "fused_neighborhood_attention": [
        {"batch": 1, "hidden": 32, "heads": 2, "kernel_size": 5, "dilation": 1, "bias": True, "seq": 20},
        {"batch": 2, "hidden": 48, "heads": 3, "kernel_size": 5, "dilation": 2, "bias": True, "seq": 19},
    ],
    "multi_token_attention": [
        {"batch": 2, "C_in": 4, "C_out": 4, "kernel": 3, "groups": 1, "bias": True, "seq": 20},
        {"batch": 1, "C_in": 4, "C_out": 2, "kernel": 3, "groups": 2, "bias": True, "seq": 17},
    ],
    "sparse_multi_token_attention": [
        {"batch": 2, "C_in": 4, "C_out": 4, "kernel": 3, "groups": 1, "bias": True, "seq": 20},
    ],
}
KERNELS, ALL_CASES, CASE_IDS = ac.case_table(CASES)

# What Liger's Triton kernels cannot do under the interpreter: (kernel, dtype) -> why.
INTERPRETER_LIMITS = {
    ("fused_neighborhood_attention", "bf16"): (
        "Triton's interpreter computes bfloat16 arithmetic wrongly on the CPU (errors of order 1e9), and "
        "Liger's neighborhood attention kernels multiply in bf16; float16 and float32 pass"),
}
# Providers that cannot run on this machine at all: (kernel, provider, dtype or None for every dtype) -> the
# text of their Unavailable reason.
UNAVAILABLE_HERE = {
    ("multi_token_attention", "liger_cutile", None): "CUDA",
    ("sparse_multi_token_attention", "liger", "bf16"): "float32 scores only",
}


def _unavailable_here(kernel, provider, dtype):
    return ac.limit_for(UNAVAILABLE_HERE, kernel, provider, dtype)


def _is_liger(provider: str) -> bool:
    return provider.startswith("liger")


@pytest.mark.parametrize("kernel", KERNELS)
def test_adapter_satisfies_contract(kernel):
    impl = ac.load_checked(kernel)
    assert impl.REFERENCE_DTYPE == torch.float64
    assert "kernelindex" not in impl.PROVIDERS and {"liger", "torch"} <= set(impl.PROVIDERS)
    assert impl.DETERMINISTIC_INPUTS == () and impl.IMPLIED == {}
    with pytest.raises(Unavailable):
        impl.build("no_such_provider", impl.make_inputs(CASES[kernel][0], "fp32", 1, "cpu"), CASES[kernel][0])


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_inputs_are_seeded_with_spec_shapes(kernel, params):
    impl = load_adapter(kernel)
    a, b, c, spec = ac.seeded_inputs(impl, kernel, params)
    assert sorted(a) == sorted(t["name"] for t in spec)
    assert set(impl.GRAD_INPUTS) == set(a)
    for t in spec:
        ac.assert_seeded_tensor(a[t["name"]], t, b[t["name"]], c[t["name"]], dtype=torch.bfloat16)


def test_multi_token_weight_is_drawn_as_upstreams_initialization():
    """Uniform within 1/sqrt(fan_in), as LigerMultiTokenAttention.reset_parameters draws it upstream."""
    impl = load_adapter("multi_token_attention")
    params = {"batch": 1, "C_in": 8, "C_out": 64, "kernel": 3, "groups": 2, "bias": True, "seq": 4}
    weight = impl.make_inputs(params, "fp32", 3, "cpu")["weight"]
    bound = 1.0 / (4 * 3 * 3) ** 0.5
    assert list(weight.shape) == [64, 4, 3, 3]
    assert float(weight.abs().max()) <= bound
    assert float(weight.abs().max()) > 0.9 * bound


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_floors_are_positive_and_full_covers_each_pass(kernel, params):
    impl = load_adapter(kernel)
    f = ac.check_floors(impl, params)
    assert impl.matmul_shapes(params) == []


@pytest.mark.parametrize("params", CASES["fused_neighborhood_attention"])
def test_neighborhood_pairs_count_the_windows(params):
    """The pair count behind the flops is the number of True entries of upstream's own mask."""
    impl = importlib.import_module("kernels.fused_neighborhood_attention.impl")
    seq, kernel_size, dilation = params["seq"], params["kernel_size"], params["dilation"]
    mask = impl.upstream_neighborhood_mask(seq, kernel_size, dilation, "cpu")
    assert impl.neighborhood_pairs(seq, kernel_size, dilation) == int(mask.sum())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_providers_match_reference(kernel, params, dtype):
    impl = load_adapter(kernel)
    limited = INTERPRETER_LIMITS.get((kernel, dtype))
    providers = [p for p in impl.PROVIDERS if not (_is_liger(p) and limited)]
    result = check_correctness(impl, providers, params, dtype, "cpu", seeds=SEEDS)
    for provider in providers:
        res = result[provider]
        why_not = _unavailable_here(kernel, provider, dtype)
        if why_not:
            assert res["status"] == "unavailable" and why_not in res["reason"], (provider, res)
            continue
        assert res["status"] == "passed", (provider, res.get("reason"))
        assert set(res["outputs"]) == set(impl.OUTPUT_NAMES)
        assert set(res["gradients"]) == set(impl.GRAD_INPUTS)
        assert res["label"]
    if limited:
        pytest.skip(f"Liger not checked at {dtype}: {limited}")


@pytest.mark.parametrize("params", CASES["fused_neighborhood_attention"])
def test_liger_neighborhood_attention_low_precision_in_fp16(params):
    """Where the interpreter's bf16 arithmetic keeps Liger's bf16 check out, fp16 exercises the same
    low-precision loads, stores and casts."""
    impl = load_adapter("fused_neighborhood_attention")
    res = check_correctness(impl, ["liger"], params, "fp16", "cpu", seeds=SEEDS)["liger"]
    assert res["status"] == "passed", res.get("reason")


@pytest.mark.parametrize(("kernel", "dtype"), sorted(INTERPRETER_LIMITS))
def test_interpreter_limits_still_hold(kernel, dtype):
    """The Liger checks skipped above fail for the stated reason, so that a fixed interpreter shows up."""
    impl = load_adapter(kernel)
    res = check_correctness(impl, ["liger"], CASES[kernel][0], dtype, "cpu", seeds=(1,))["liger"]
    assert res["status"] == "failed", INTERPRETER_LIMITS[(kernel, dtype)]


@pytest.mark.parametrize("how", ["outputs", "gradients"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_comparison_catches_planted_wrong_provider(kernel, how):
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    ac.check_planted(impl, "torch", params, how)


@pytest.mark.parametrize("kernel", KERNELS)
def test_liger_needs_cuda_outside_the_interpreter(kernel, monkeypatch):
    impl = load_adapter(kernel)
    ac.assert_liger_needs_cuda(impl, [p for p in impl.PROVIDERS if _is_liger(p)], CASES[kernel][0], monkeypatch)


def test_torch_baselines_keep_upstreams_precision():
    """Upstream's sparse baseline computes in float32 and casts back; the dense one stays in the scores'
    dtype. Both give the scores' dtype."""
    for kernel in ("multi_token_attention", "sparse_multi_token_attention"):
        impl = load_adapter(kernel)
        params = CASES[kernel][0]
        inputs = impl.make_inputs(params, "bf16", 1, "cpu")
        (out,) = impl.build("torch", inputs, params).fn()
        assert out.dtype == torch.bfloat16
        assert torch.count_nonzero(torch.triu(out, diagonal=1)) == 0


def test_liger_before_0_7_is_taken_from_its_ops_submodule(tmp_path):
    """A Liger release before 0.7.0 exports nothing from `liger_kernel.ops` itself (its `__init__` is
    empty): the adapters take the Function from its module there, as upstream's scripts at that release did.
    Here the installed release with the older layout: its `ops/__init__.py` emptied."""
    import liger_kernel

    old = tmp_path / "liger_kernel"
    shutil.copytree(Path(liger_kernel.__file__).parent, old, ignore=shutil.ignore_patterns("__pycache__"))
    (old / "ops" / "__init__.py").write_text("")
    probe = ("import torch, liger_kernel.ops as ops; from kernels.providers import liger_op; "
             "f = liger_op(torch.zeros(1), 'fused_neighborhood_attention', 'LigerFusedNeighborhoodAttentionFunction'); "
             "print(ops.__file__, hasattr(ops, f.__name__), f.__module__, f.__name__)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(old / "ops" / "__init__.py"), "False",
                                   "liger_kernel.ops.fused_neighborhood_attention", "LigerFusedNeighborhoodAttentionFunction"]
