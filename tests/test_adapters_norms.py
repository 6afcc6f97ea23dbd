"""The rerun adapter of DyT (beta on and off), on the CPU: it satisfies the adapter contract,
draws seeded inputs in the spec's shapes, builds its providers as the upstream scripts do (float32
parameters over a low-precision x), and every provider that runs here matches the reference (outputs and
gradients) through the harness's own correctness check, which also catches a planted wrong provider.

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
    Unavailable,
    check_correctness,
    kernels,
    load_adapter,
    torch,
)

from kernelindex_pipeline.gpu import protocol as P
from kernels.tensors import grad_outputs
from kernelindex_pipeline.gpu.correctness import rel_error

# Autouse here: Liger's logs of the optional backends it cannot import say nothing about these kernels.
_quiet_liger_backend_probe = ac._quiet_liger_backend_probe

# Small shapes: hidden sizes that are not powers of two, beta on and off.
CASES = {
    "dyt": [{"tokens": 5, "hidden": 72, "beta": True}, {"tokens": 6, "hidden": 40, "beta": False}],
}
KERNELS, ALL_CASES, CASE_IDS = ac.case_table(CASES)
# The provider names upstream's runs carry, which the adapters must build to pair with them.
UPSTREAM_PROVIDERS = {"dyt": {"liger", "torch", "torch_compile"}}
# The upstream baseline each planted-wrong check perturbs (one that runs on the CPU).
BASELINE = {"dyt": "torch"}

_AUTOTUNED = ("Liger's DyT kernels are autotuned, and Triton's autotuner cannot benchmark under the interpreter "
              "(no active driver); its backward also reads a CUDA, XPU or NPU core count that the CPU leaves "
              "unset (UnboundLocalError)")
# (kernel, provider, dtype or None for every dtype) -> (text the failure shows, why the interpreter cannot run it).
INTERPRETER_LIMITS = {
    ("dyt", "liger", None): ("0 active drivers", _AUTOTUNED),
}


def _provider_cases():
    for (kernel, params), case_id in zip(ALL_CASES, CASE_IDS):
        for provider in load_adapter(kernel).PROVIDERS:
            # One dtype for torch.compile: each compile takes seconds on the CPU.
            for dtype in ("fp32",) if provider == "torch_compile" else DTYPES:
                yield pytest.param(kernel, params, provider, dtype, id=f"{case_id}-{provider}-{dtype}")


def _skip_for_interpreter(kernel, provider, dtype, result) -> None:
    """Skip, naming why, where the interpreter cannot run ``provider`` and it failed as it is known to."""
    limit = ac.limit_for(INTERPRETER_LIMITS, kernel, provider, dtype)
    if limit is not None and result["status"] == "failed":
        shows, why = limit
        assert shows in result["reason"], result["reason"]
        pytest.skip(f"Triton's interpreter cannot run {kernel} {provider} ({dtype}): {why}")


@pytest.mark.parametrize("kernel", KERNELS)
def test_module_satisfies_the_adapter_contract(kernel):
    impl = ac.load_checked(kernel)
    assert impl.KERNEL == kernel
    assert UPSTREAM_PROVIDERS[kernel] <= set(impl.PROVIDERS) and "kernelindex" not in impl.PROVIDERS
    assert impl.IMPLIED == {} and impl.DETERMINISTIC_INPUTS == ()
    assert impl.REFERENCE_DTYPE == torch.float64
    for params in CASES[kernel]:
        inputs = impl.make_inputs(params, "fp32", 0, "cpu")
        assert impl.OUTPUT_NAMES and set(impl.GRAD_INPUTS) <= set(inputs)
        with pytest.raises(Unavailable):
            impl.build("no-such-provider", inputs, params)


def test_dyt_providers_are_exactly_upstreams():
    assert load_adapter("dyt").PROVIDERS == ("liger", "torch", "torch_compile")


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_inputs_are_seeded_with_the_spec_shapes(kernel, params):
    impl = load_adapter(kernel)
    a, b, c, spec = ac.seeded_inputs(impl, kernel, params)
    assert spec is not None and [t["name"] for t in spec] == list(a)
    for t in spec:
        ac.assert_seeded_tensor(a[t["name"]], t, b[t["name"]], c[t["name"]])


def test_spec_shapes_follow_upstreams_layers():
    dyt = kernels.lookup("dyt")
    assert {t["name"]: t["shape"] for t in dyt.input_tensors({"tokens": 4096, "hidden": 8192, "beta": True}, "bf16")} \
        == {"x": [4096, 8192], "alpha": [1], "gamma": [8192], "beta": [8192]}
    assert [t["name"] for t in dyt.input_tensors({"tokens": 4096, "hidden": 8192, "beta": False}, "bf16")] \
        == ["x", "alpha", "gamma"]


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_cost_model_is_positive_and_has_no_gemms(kernel, params):
    impl = load_adapter(kernel)
    ac.check_floors(impl, params)
    for mode in ("forward", "backward", "full"):
        assert impl.bytes_moved(params, "fp32", mode) > impl.bytes_moved(params, "bf16", mode)
    assert impl.matmul_shapes(params) == []


def test_bytes_count_x_in_the_workload_dtype_and_parameters_in_float32():
    dyt = load_adapter("dyt")
    on, off = {"tokens": 4, "hidden": 8, "beta": True}, {"tokens": 4, "hidden": 8, "beta": False}
    xb = 4 * 8 * 2
    assert dyt.bytes_moved(off, "bf16", "forward") == 2 * xb + 4 * (1 + 8)
    assert dyt.bytes_moved(on, "bf16", "forward") == 2 * xb + 4 * (1 + 8 + 8)
    assert dyt.bytes_moved(on, "bf16", "backward") == 3 * xb + 4 * (1 + 8) + 4 * (1 + 8 + 8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_eager_baseline_keeps_float32_parameters_as_upstream(kernel, params, dtype):
    """The scripts move their layers to the device without casting them: float32 parameters holding the
    drawn values exactly; the eager layer then returns float32."""
    impl = load_adapter(kernel)
    inputs = impl.make_inputs(params, dtype, 3, "cpu")
    built = impl.build(BASELINE[kernel], inputs, params)
    for name, leaf in built.leaves.items():
        if name != "x":
            assert leaf.dtype == torch.float32 and torch.equal(leaf, inputs[name].float()), name
    (y,) = built.fn()
    assert y.dtype == torch.float32


@pytest.mark.parametrize(("kernel", "params", "provider", "dtype"), list(_provider_cases()))
def test_provider_matches_the_reference(kernel, params, provider, dtype):
    impl = load_adapter(kernel)
    result = check_correctness(impl, [provider], params, dtype, "cpu", seeds=SEEDS)[provider]
    if result["status"] == "unavailable":
        pytest.skip(f"{provider} unavailable here: {result['reason']}")
    _skip_for_interpreter(kernel, provider, dtype, result)
    ac.assert_passed(impl, provider, result)


@pytest.mark.parametrize("provider", load_adapter("dyt").PROVIDERS)
def test_dyt_beta_gradient_matches_the_reference(provider):
    """beta's gradient, which GRAD_INPUTS cannot name (beta is an input only when on), against the reference's."""
    impl = load_adapter("dyt")
    params = CASES["dyt"][0]
    assert params["beta"]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    try:
        built = impl.build(provider, inputs, params)
    except Unavailable as exc:
        pytest.skip(f"{provider} unavailable here: {exc}")
    try:
        outs = built.fn()
        dys = grad_outputs(outs, 1)
        (got,) = torch.autograd.grad(outs, [built.leaves["beta"]], dys)
    except Exception as exc:  # noqa: BLE001 - reported as the harness would, then matched against the limits
        _skip_for_interpreter("dyt", provider, "fp32", {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"})
        raise
    ref_in = {n: t.detach().to(torch.float64).requires_grad_(n == "beta") for n, t in inputs.items()}
    (ref,) = impl.reference(ref_in, params)
    (want,) = torch.autograd.grad(ref, [ref_in["beta"]], [dys[0].to(torch.float64)])
    assert rel_error(got, want) <= P.tolerance("fp32", "gradients")


@pytest.mark.parametrize("how", ["outputs", "gradients"])
@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_a_planted_wrong_provider_is_caught(kernel, params, how):
    impl = load_adapter(kernel)
    ac.check_planted(impl, BASELINE[kernel], params, how)


@pytest.mark.parametrize("kernel", KERNELS)
def test_liger_needs_cuda_or_the_interpreter(kernel, monkeypatch):
    impl = load_adapter(kernel)
    liger = [p for p in impl.PROVIDERS if p.startswith("liger")]
    ac.assert_liger_needs_cuda(impl, liger, CASES[kernel][0], monkeypatch)
