"""Rerun adapters of GroupNorm, Embedding, fused add + RMSNorm, Megatron RMSNorm, Qwen2-VL M-RoPE and fused
linear cross entropy, on the CPU: each satisfies the adapter contract, draws seeded inputs in the spec's
shapes, and every provider that runs here matches the reference (outputs and gradients) through the
harness's own correctness check, which also catches a planted wrong provider.

Liger's providers run under Triton's CPU interpreter; where the interpreter cannot run Liger's kernel the
test says why in its skip reason. TRITON_INTERPRET must be set before triton is imported, so this module
imports ``adapter_checks``, which sets it, first.
"""

from __future__ import annotations

import adapter_checks as ac  # first: sets TRITON_INTERPRET before triton is imported
import pytest
from adapter_checks import (
    DTYPES,
    SEEDS,
    Built,
    Unavailable,
    adapter_problems,
    check_correctness,
    kernels,
    load_adapter,
    torch,
)

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "int64": torch.int64}

# Small shapes: groups of 4 channels over an odd spatial size, head counts and rows that are not powers of two.
CASES = {
    "group_norm": {"rows": 3, "channels": 12, "hidden": 20, "channels_per_group": 4, "eps": 1e-6},
    "embedding": {"batch": 2, "seq": 7, "vocab": 50, "dim": 24},
    "fused_add_rms_norm": {"rows": 5, "hidden": 72, "eps": 1e-6},
    "megatron_rms_norm": {"seq": 6, "batch": 2, "hidden": 72},
    "qwen2vl_mrope": {"batch": 1, "seq": 9, "hidden": 96, "q_heads": 3, "kv_heads": 1},
    "fused_linear_cross_entropy": {"tokens": 24, "hidden": 40, "vocab": 300},
}

_FLOAT_ARGS = ("Liger's kernel casts its eps argument with eps.to(...), and the interpreter passes float "
               "arguments as Python floats, not tensors")
_BF16_GARBAGE = ("the interpreter returns garbage (NaN among it) for this kernel's bfloat16 values; float16 and "
                 "float32 pass, and bfloat16 passes on the GPU")
# (kernel, provider, dtype or None for every dtype) -> (text the failure shows, why the interpreter cannot run it).
INTERPRETER_LIMITS = {
    ("group_norm", "liger", None): ("has no attribute 'to'", _FLOAT_ARGS),
    ("group_norm", "liger_triton", None): ("has no attribute 'to'", _FLOAT_ARGS),
    ("fused_add_rms_norm", "liger_fused_add_rms_norm", None): ("has no attribute 'to'", _FLOAT_ARGS),
    ("fused_add_rms_norm", "liger_rms_norm", None): ("has no attribute 'to'", _FLOAT_ARGS),
    ("megatron_rms_norm", "liger", None): ("has no attribute 'to'", _FLOAT_ARGS),
    ("embedding", "liger", "bf16"): (
        "Unsupported data type", "the interpreter's atomic add has no bfloat16 (Liger's backward scatters with it)"),
    ("qwen2vl_mrope", "liger", "bf16"): ("nan", _BF16_GARBAGE),
    ("qwen2vl_mrope", "liger_triton", "bf16"): ("nan", _BF16_GARBAGE),
}


def _limit(kernel, provider, dtype):
    return INTERPRETER_LIMITS.get((kernel, provider, dtype)) or INTERPRETER_LIMITS.get((kernel, provider, None))


def _provider_cases():
    for kernel in CASES:
        for provider in load_adapter(kernel).PROVIDERS:
            # One dtype for torch.compile: each compile takes seconds on the CPU.
            for dtype in ("fp32",) if provider == "torch_compile" else DTYPES:
                yield kernel, provider, dtype


@pytest.mark.parametrize("kernel", CASES)
def test_module_satisfies_the_adapter_contract(kernel):
    impl = load_adapter(kernel)
    assert adapter_problems(impl) == []
    assert impl.KERNEL == kernel and kernels.is_known(kernel)
    assert "kernelindex" not in impl.PROVIDERS
    assert set(impl.IMPLIED) <= set(kernels.lookup(kernel).implied)
    names = set(impl.make_inputs(CASES[kernel], "fp32", 0, "cpu"))
    assert impl.OUTPUT_NAMES and set(impl.GRAD_INPUTS) <= names and set(impl.DETERMINISTIC_INPUTS) <= names
    with pytest.raises(Unavailable):
        impl.build("no-such-provider", impl.make_inputs(CASES[kernel], "fp32", 0, "cpu"), CASES[kernel])


@pytest.mark.parametrize("kernel", CASES)
def test_cost_model_is_positive_and_only_the_fused_loss_has_gemms(kernel):
    impl = load_adapter(kernel)
    params = CASES[kernel]
    for mode in ("forward", "backward", "full"):
        moved = impl.bytes_moved(params, "bf16", mode)
        assert isinstance(moved, int) and moved > 0
        assert impl.bytes_moved(params, "fp32", mode) > moved
        assert isinstance(impl.flops(params, mode), int) and impl.flops(params, mode) >= 0
    assert impl.flops(params, "full") > 0
    shapes = impl.matmul_shapes(params)
    if kernel == "fused_linear_cross_entropy":
        t, h, v = params["tokens"], params["hidden"], params["vocab"]
        assert shapes == [(t, v, h), (t, h, v), (v, h, t)]
        assert impl.flops(params, "forward") >= 2 * t * h * v
    else:
        assert shapes == []


@pytest.mark.parametrize("kernel", CASES)
def test_inputs_are_seeded_with_the_spec_shapes(kernel):
    impl = load_adapter(kernel)
    params = CASES[kernel]
    a = impl.make_inputs(params, "bf16", 5, "cpu")
    b = impl.make_inputs(params, "bf16", 5, "cpu")
    c = impl.make_inputs(params, "bf16", 6, "cpu")
    spec = kernels.lookup(kernel).input_tensors(params, "bf16")
    assert [t["name"] for t in spec] == list(a)
    for t in spec:
        x = a[t["name"]]
        assert list(x.shape) == t["shape"] and x.dtype == TORCH_DTYPES[t["dtype"]], t
        assert torch.equal(x, b[t["name"]])
        assert bool(x.ne(0).any()), f"{t['name']} is all zeros"
        if t["name"] in impl.DETERMINISTIC_INPUTS:
            assert torch.equal(x, c[t["name"]])
    drawn = [n for n in a if n not in impl.DETERMINISTIC_INPUTS]
    assert drawn and all(not torch.equal(a[n], c[n]) for n in drawn)


@pytest.mark.parametrize(("kernel", "provider", "dtype"), list(_provider_cases()))
def test_provider_matches_the_reference(kernel, provider, dtype):
    impl = load_adapter(kernel)
    result = check_correctness(impl, [provider], CASES[kernel], dtype, "cpu", seeds=SEEDS)[provider]
    if result["status"] == "unavailable":
        pytest.skip(f"{provider} unavailable here: {result['reason']}")
    limit = _limit(kernel, provider, dtype)
    if limit is not None and result["status"] == "failed":
        shows, why = limit
        assert shows in result["reason"], result["reason"]
        pytest.skip(f"Triton's interpreter cannot run {kernel} {provider} ({dtype}): {why}")
    assert result["status"] == "passed", result.get("reason")
    assert set(result["outputs"]) == set(impl.OUTPUT_NAMES)
    assert set(result["gradients"]) == set(impl.GRAD_INPUTS)


@pytest.mark.parametrize("kernel", CASES)
def test_a_planted_wrong_provider_is_caught(kernel):
    impl = load_adapter(kernel)
    honest = next(p for p in ("huggingface", "torch") if p in impl.PROVIDERS)

    def build(provider, inputs, params):
        built = impl.build(honest, inputs, params)
        inner = built.fn

        def perturbed():
            first, *rest = inner()
            return (first * 1.05, *rest)

        return Built(perturbed, built.leaves, "planted: first output scaled by 1.05", built.output_names)

    for dtype in DTYPES:
        result = check_correctness(impl, ["planted"], CASES[kernel], dtype, "cpu", seeds=SEEDS, build=build)["planted"]
        assert result["status"] == "failed"
        assert f"output {impl.OUTPUT_NAMES[0]}:" in result["reason"]


@pytest.mark.parametrize("kernel", CASES)
def test_liger_needs_cuda_or_the_interpreter(kernel, monkeypatch):
    impl = load_adapter(kernel)
    inputs = impl.make_inputs(CASES[kernel], "fp32", 0, "cpu")
    liger = [p for p in impl.PROVIDERS if p.startswith("liger")]
    ac.assert_liger_needs_cuda(impl, liger, CASES[kernel], monkeypatch, inputs=inputs)
