"""The rerun adapters of DyT (beta on and off) and PolyNorm, on the CPU: each satisfies the adapter contract,
draws seeded inputs in the spec's shapes, builds its providers as the upstream scripts do (float32
parameters over a low-precision x), and every provider that runs here matches the reference (outputs and
gradients) through the harness's own correctness check, which also catches a planted wrong provider.
PolyNorm's spec keeps the workloads published before it existed byte for byte.

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

# Small shapes: hidden sizes that are not powers of two, beta on and off; PolyNorm with the eps its published
# workloads state and without it (the script's 1e-6).
CASES = {
    "dyt": [{"tokens": 5, "hidden": 72, "beta": True}, {"tokens": 6, "hidden": 40, "beta": False}],
    "poly_norm": [{"rows": 5, "hidden": 72, "eps": 1e-6}, {"rows": 6, "hidden": 40}],
}
KERNELS, ALL_CASES, CASE_IDS = ac.case_table(CASES)
# The provider names upstream's runs carry, which the adapters must build to pair with them.
UPSTREAM_PROVIDERS = {"dyt": {"liger", "torch", "torch_compile"}, "poly_norm": {"liger", "huggingface"}}
# The upstream baseline each planted-wrong check perturbs (one that runs on the CPU).
BASELINE = {"dyt": "torch", "poly_norm": "huggingface"}
# Whether the eager baseline returns float32 (DyT's layer, which never casts back) or x's dtype (PolyNorm's,
# which computes in float32 and casts back).
EAGER_RETURNS_FLOAT32 = {"dyt": True, "poly_norm": False}

_AUTOTUNED = ("Liger's DyT kernels are autotuned, and Triton's autotuner cannot benchmark under the interpreter "
              "(no active driver); its backward also reads a CUDA, XPU or NPU core count that the CPU leaves "
              "unset (UnboundLocalError)")
_POLY_NORM = ("Liger's PolyNorm forward kernel casts its eps argument with eps.to(tl.float32), and the interpreter "
              "passes float arguments as Python floats, not tensors; past that, the interpreter gives no value for "
              "the libdevice rsqrt the kernel calls, and returns garbage for bfloat16 loads")
# (kernel, provider, dtype or None for every dtype) -> (text the failure shows, why the interpreter cannot run it).
INTERPRETER_LIMITS = {
    ("dyt", "liger", None): ("0 active drivers", _AUTOTUNED),
    ("poly_norm", "liger", None): ("has no attribute 'to'", _POLY_NORM),
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


def test_poly_norm_providers_are_exactly_upstreams():
    assert load_adapter("poly_norm").PROVIDERS == ("liger", "huggingface")


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_inputs_are_seeded_with_the_spec_shapes(kernel, params):
    impl = load_adapter(kernel)
    a, b, c, spec = ac.seeded_inputs(impl, kernel, params)
    assert spec is not None and [t["name"] for t in spec] == list(a)
    for t in spec:
        dtype = torch.float32 if t["dtype"] == "fp32" else None
        ac.assert_seeded_tensor(a[t["name"]], t, b[t["name"]], c[t["name"]], dtype)


def test_spec_shapes_follow_upstreams_layers():
    dyt = kernels.lookup("dyt")
    assert {t["name"]: t["shape"] for t in dyt.input_tensors({"tokens": 4096, "hidden": 8192, "beta": True}, "bf16")} \
        == {"x": [4096, 8192], "alpha": [1], "gamma": [8192], "beta": [8192]}
    assert [t["name"] for t in dyt.input_tensors({"tokens": 4096, "hidden": 8192, "beta": False}, "bf16")] \
        == ["x", "alpha", "gamma"]
    # LigerPolyNorm and the script's eager layer: a float32 weight of three and a float32 scalar bias.
    poly = kernels.lookup("poly_norm")
    assert poly.input_tensors({"rows": 2048, "eps": 1e-6, "hidden": 4096}, "bf16") == [
        {"name": "x", "dtype": "bf16", "shape": [2048, 4096]},
        {"name": "weight", "dtype": "fp32", "shape": [3]},
        {"name": "bias", "dtype": "fp32", "shape": []},
    ]


# Two of the poly_norm workloads published before the family had a spec, as the warehouse stores them.
PUBLISHED_POLY_NORM = {
    1024: "sha256:5c1f80815eb7354ff49b5bb2b55dff5b1a43f1affd7ace6521288da662ed39fc",
    32768: "sha256:5b81c76ec99fc3e50b62ec7ceb341aa9a8f942b7a5afc9d860198458eccbdc9e",
}


@pytest.mark.parametrize("hidden", sorted(PUBLISHED_POLY_NORM))
def test_poly_norm_spec_keeps_its_published_workloads(hidden):
    """The generic title they were published with, their parameters as stored, their inputs left unknown: the
    same digest, though the spec now knows the shapes."""
    from kernelindex_pipeline.core.documents import workload_definition

    w = workload_definition("poly_norm", {"rows": 2048, "eps": 1e-06, "hidden": hidden}, "bf16")
    assert w["workload_slug"] == f"eps1e_06-hidden{hidden}-rows2048-bf16"
    title = f"Poly norm · rows = 2048 · hidden = {hidden} · eps = 1e-06 · bf16"
    assert w["definition"]["metadata"]["title"] == title
    assert w["definition"]["spec"]["inputs"] == "unknown" and w["shapes_known"] and w["known_kernel"]
    assert w["workload_digest"] == PUBLISHED_POLY_NORM[hidden]


def test_poly_norm_reference_weights_each_power_as_upstream():
    """weight[0] scales norm(x^3), weight[1] norm(x^2), weight[2] norm(x), then the bias: worked by hand for the
    row x = (1, 2), where mean(x^2) = 5/2, mean(x^4) = 17/2 and mean(x^6) = 65/2."""
    impl = load_adapter("poly_norm")
    x = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    eps, bias = 1e-6, torch.tensor(0.5, dtype=torch.float64)
    want = {0: [1.0, 8.0], 1: [1.0, 4.0], 2: [1.0, 2.0]}
    mean_square = {0: 65 / 2, 1: 17 / 2, 2: 5 / 2}
    for i in range(3):
        weight = torch.zeros(3, dtype=torch.float64)
        weight[i] = 2.0
        (y,) = impl.reference({"x": x, "weight": weight, "bias": bias}, {"eps": eps})
        expected = torch.tensor([want[i]], dtype=torch.float64) * 2.0 / (mean_square[i] + eps) ** 0.5 + 0.5
        assert torch.allclose(y, expected, rtol=1e-12, atol=0), i


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
    poly = load_adapter("poly_norm")
    params = {"rows": 4, "hidden": 8, "eps": 1e-6}
    assert poly.bytes_moved(params, "bf16", "forward") == 2 * xb + 4 * (3 + 1)
    assert poly.bytes_moved(params, "bf16", "backward") == 3 * xb + 4 * 3 + 4 * (3 + 1)
    assert poly.bytes_moved(params, "bf16", "full") == 4 * xb + 2 * 4 * (3 + 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_eager_baseline_keeps_float32_parameters_as_upstream(kernel, params, dtype):
    """The scripts move their layers to the device without casting them: float32 parameters holding the
    drawn values exactly; DyT's eager layer then returns float32, PolyNorm's casts back to x's dtype."""
    impl = load_adapter(kernel)
    inputs = impl.make_inputs(params, dtype, 3, "cpu")
    built = impl.build(BASELINE[kernel], inputs, params)
    for name, leaf in built.leaves.items():
        if name != "x":
            assert leaf.dtype == torch.float32 and torch.equal(leaf, inputs[name].float()), name
    (y,) = built.fn()
    assert y.dtype == (torch.float32 if EAGER_RETURNS_FLOAT32[kernel] else inputs["x"].dtype)


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
