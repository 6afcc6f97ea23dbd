"""Rerun adapters of the loss, softmax-like and elementwise families, on the CPU under Triton's interpreter.

Each adapter is checked against the contract, for seeded inputs with the spec's shapes, and for every
provider that runs here against its float64 reference through the harness's own comparison; a planted
wrong provider must fail that comparison. TRITON_INTERPRET must be set before triton is imported, so this
module imports ``adapter_checks``, which sets it, first.

The DPO loss (``kernels/dpo_loss``, an LM-head preference loss with a reference head) has its own cases at the
end: its reference runs in float32 and its baseline is the huggingface one. Liger's ``LigerFusedLinearDPOLoss``
is chunked PyTorch, no Triton, so the interpreter has nothing of it to run and both providers are checked at
float32 and bfloat16; only ``torch.compile``, which the adapter keeps on CUDA, is left out (eager off CUDA).
"""

from __future__ import annotations

import adapter_checks as ac  # first: sets TRITON_INTERPRET before triton is imported
import pytest
from adapter_checks import (  # noqa: F401 (the autouse fixture)
    DTYPES,
    SEEDS,
    Unavailable,
    _quiet_liger_backend_probe,
    check_correctness,
    kernels,
    load_adapter,
    torch,
)

# Liger's JSD kernel subtracts -inf from -inf in the masked lanes of a row's last block, which the
# interpreter (numpy) reports; those lanes are never stored, and a NaN that reached an output would fail.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")

# Small shapes, odd sizes so that Liger's row blocks have masked tails; both spellings of the token count.
CASES = {
    "cross_entropy": [{"tokens": 37, "vocab": 1000}, {"batch": 2, "seq": 8, "vocab": 300}],
    "softmax": [{"rows": 9, "cols": 300}],
    "jsd": [{"tokens": 37, "vocab": 1000}, {"batch": 2, "seq": 8, "vocab": 300}],
    "kl_div": [{"tokens": 37, "vocab": 1000, "reduction": "batchmean"}, {"batch": 2, "seq": 8, "vocab": 300}],
    "tvd": [{"batch": 2, "seq": 16, "vocab": 1000}],
    "sparsemax": [{"batch": 2, "seq": 8, "cols": 300, "dim": -1}, {"tokens": 16, "hidden": 200, "dim": -1}],
    "relu_squared": [{"rows": 9, "hidden": 300}],
}
KERNELS, ALL_CASES, CASE_IDS = ac.case_table(CASES)

_FLOAT_SCALAR = ("Triton's interpreter passes a float scalar argument as a Python float, and Liger's kernel "
                 "calls {name}.to(tl.float32) on it")
_BF16_MATH = ("Triton's interpreter computes bfloat16 arithmetic wrongly on the CPU (a bf16 product gives "
              "garbage), and Liger's {what} multiplies in bf16")
# What Liger's Triton kernels cannot do under the interpreter: (kernel, dtype or None for every dtype) -> why.
INTERPRETER_LIMITS = {
    ("kl_div", None): _FLOAT_SCALAR.format(name="eps"),
    ("tvd", None): _FLOAT_SCALAR.format(name="scale"),
    ("cross_entropy", "bf16"): _BF16_MATH.format(what="element_mul_kernel (upstream gradient not 1)"),
    ("softmax", "bf16"): _BF16_MATH.format(what="backward kernel"),
    ("relu_squared", "bf16"): _BF16_MATH.format(what="kernel"),
}
# Upstream's own PyTorch baselines that the comparison fails, for a reason of theirs: (kernel, dtype) -> why.
BASELINE_FAILS = {
    ("sparsemax", "bf16"): "benchmark_sparsemax.py's sort-based function sums and counts in bf16",
}


def _interpreter_limit(kernel: str, dtype: str) -> str | None:
    return ac.limit_for(INTERPRETER_LIMITS, kernel, dtype)


def _providers_here(impl) -> list[str]:
    """Every provider, less Liger when liger_kernel is not installed."""
    have_liger = ac.have_liger()
    return [p for p in impl.PROVIDERS if p != "liger" or have_liger]


@pytest.mark.parametrize("kernel", KERNELS)
def test_adapter_satisfies_contract(kernel):
    impl = ac.load_checked(kernel)
    assert impl.REFERENCE_DTYPE == torch.float64
    assert "kernelindex" not in impl.PROVIDERS
    assert impl.DETERMINISTIC_INPUTS == ()
    assert impl.IMPLIED == {}
    with pytest.raises(Unavailable):
        impl.build("no_such_provider", impl.make_inputs(CASES[kernel][0], "fp32", 1, "cpu"), CASES[kernel][0])


@pytest.mark.parametrize("kernel", KERNELS)
def test_inputs_are_seeded_with_spec_shapes(kernel):
    impl = load_adapter(kernel)
    for params in CASES[kernel]:
        a, b, c, spec = ac.seeded_inputs(impl, kernel, params)
        assert sorted(a) == sorted(t["name"] for t in spec)
        for t in spec:
            ac.assert_seeded_tensor(a[t["name"]], t, b[t["name"]], c[t["name"]])


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_floors_are_positive_and_full_covers_each_pass(kernel, params):
    impl = load_adapter(kernel)
    ac.check_floors(impl, params)
    assert impl.matmul_shapes(params) == []


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_providers_match_reference(kernel, params, dtype):
    impl = load_adapter(kernel)
    providers = [p for p in _providers_here(impl)
                 if p != "liger" or _interpreter_limit(kernel, dtype) is None]
    providers = [p for p in providers if p != "torch" or (kernel, dtype) not in BASELINE_FAILS]
    result = check_correctness(impl, providers, params, dtype, "cpu", seeds=SEEDS)
    for provider in providers:
        ac.assert_passed(impl, provider, result[provider])
    if "liger" in impl.PROVIDERS and "liger" not in providers:
        why = _interpreter_limit(kernel, dtype) or "liger_kernel is not installed"
        pytest.skip(f"liger not checked at {dtype}: {why}")


@pytest.mark.parametrize("kernel", sorted(k for k, d in INTERPRETER_LIMITS if d == "bf16"))
def test_liger_low_precision_in_fp16(kernel):
    """Where the interpreter's bf16 arithmetic keeps Liger's bf16 check out, fp16 exercises the same
    low-precision loads, stores and casts."""
    if not ac.have_liger():
        pytest.skip("liger_kernel is not installed")
    impl = load_adapter(kernel)
    res = check_correctness(impl, ["liger"], CASES[kernel][0], "fp16", "cpu", seeds=SEEDS)["liger"]
    assert res["status"] == "passed", res.get("reason")


@pytest.mark.parametrize(("kernel", "dtype"), sorted((k, d or "fp32") for k, d in INTERPRETER_LIMITS))
def test_interpreter_limits_still_hold(kernel, dtype):
    """The Liger checks skipped above fail for the stated reason, so that a fixed interpreter shows up."""
    if not ac.have_liger():
        pytest.skip("liger_kernel is not installed")
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    res = check_correctness(impl, ["liger"], params, dtype, "cpu", seeds=(1,))["liger"]
    assert res["status"] == "failed", _interpreter_limit(kernel, dtype)
    if _interpreter_limit(kernel, None):
        assert "InterpreterError" in res["reason"]


@pytest.mark.parametrize(("kernel", "dtype"), sorted(BASELINE_FAILS))
def test_an_upstream_baseline_beyond_the_fixed_tolerance_sets_the_level_of_its_dtype(kernel, dtype):
    """The eager baseline misses the protocol's fixed tolerance in this dtype (BASELINE_FAILS says why); under
    the field's rule its own error is the level of its dtype, so it passes, and the record names the rule."""
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    res = check_correctness(impl, ["torch"], params, dtype, "cpu", seeds=SEEDS)["torch"]
    beyond = [n for kind in ("outputs", "gradients") for n, v in res[kind].items() if v["rel_error"] > v["tolerance"]]
    assert beyond, BASELINE_FAILS[(kernel, dtype)]
    assert res["status"] == "passed" and res["rule"]["baseline"] == "torch"
    assert check_correctness(impl, ["torch"], params, "fp32", "cpu", seeds=SEEDS)["torch"]["status"] == "passed"


@pytest.mark.parametrize("how", ["outputs", "gradients"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_comparison_catches_planted_wrong_provider(kernel, how):
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    ac.check_planted(impl, "torch", params, how)


@pytest.mark.parametrize("kernel", KERNELS)
def test_liger_needs_cuda_outside_the_interpreter(kernel, monkeypatch):
    impl = load_adapter(kernel)
    ac.assert_liger_needs_cuda(impl, ["liger"], CASES[kernel][0], monkeypatch)


def test_cross_entropy_model_sweep_takes_the_models_vocabulary():
    impl = load_adapter("cross_entropy")
    params = {"batch": 1, "seq": 4, "model": "llama_2_7b"}
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    assert list(inputs["logits"].shape) == [4, 32000]
    assert int(inputs["target"].max()) < 32000
    assert impl.bytes_moved(params, "fp32", "forward") == 4 * 32000 * 4 + 4 * 8 + 4
    with pytest.raises(ValueError, match="unknown model"):
        impl.make_inputs({"batch": 1, "seq": 4, "model": "no_such_model"}, "fp32", 1, "cpu")


def test_kl_div_reduction_none_keeps_every_element():
    impl = load_adapter("kl_div")
    params = {"tokens": 5, "vocab": 64, "reduction": "none"}
    res = check_correctness(impl, ["torch"], params, "fp32", "cpu", seeds=(1,))["torch"]
    assert res["status"] == "passed", res.get("reason")
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    (loss,) = impl.reference(inputs, params)
    assert loss.shape == (5, 64)
    assert impl.bytes_moved(params, "fp32", "forward") == 3 * 5 * 64 * 4


def test_sparsemax_reference_takes_the_gradient_on_its_support_at_a_tie():
    """x = (2, 1.5, 1.25, 0): tau = 1.25 equals the third element, which stays out of the support; the
    gradient is dy - mean(dy) on the support {0, 1} and zero elsewhere, as Liger's backward gives it."""
    impl = load_adapter("sparsemax")
    params = {"tokens": 1, "cols": 4, "dim": -1}
    x = torch.tensor([[2.0, 1.5, 1.25, 0.0]], dtype=torch.float64, requires_grad=True)
    dy = torch.tensor([[1.0, 2.0, 4.0, 8.0]], dtype=torch.float64)
    (y,) = impl.reference({"x": x}, params)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert torch.equal(y.detach(), torch.tensor([[0.75, 0.25, 0.0, 0.0]], dtype=torch.float64))
    assert torch.equal(dx, torch.tensor([[-0.5, 0.5, 0.0, 0.0]], dtype=torch.float64))
    if ac.have_liger():
        built = impl.build("liger", {"x": x.detach().float()}, params)
        (y_liger,) = built.fn()
        (dx_liger,) = torch.autograd.grad(y_liger, built.leaves["x"], dy.float())
        assert torch.equal(dx_liger, dx.float())


# ---------------------------------------------------------------------------------------------------------------
# DPO loss

DPO = "dpo_loss"
DPO_LOSS = {"beta": 0.1, "bias": True, "ignore_index": 42, "mode": "forward"}
# Small shapes with odd vocabularies and sequences of odd length (batch: sequences, chosen then rejected);
# the source workloads' parameters besides. At these seeds every sequence keeps an unignored token.
DPO_CASES = [{"batch": 2, "seq": 7, "hidden": 32, "vocab": 301, **DPO_LOSS},
             {"batch": 6, "seq": 5, "hidden": 16, "vocab": 200, **DPO_LOSS}]
DPO_IDS = ["case0", "case1"]
# A published workload (batch 32, bf16) and the digest it was published with, before the family had a spec.
DPO_PUBLISHED = ({"seq": 512, "hidden": 1024, "vocab": 128256, "mode": "forward", "bias": True, "beta": 0.1,
                  "ignore_index": 42, "batch": 32},
                 "sha256:ecc6399e96de10fc514c68fbb08f828d3fe724990515d179212b2737ae88dc20")


def _dpo_providers_here() -> list[str]:
    return ["liger", "huggingface"] if ac.have_liger() else ["huggingface"]


def test_dpo_adapter_satisfies_contract():
    impl = ac.load_checked(DPO)
    assert impl.REFERENCE_DTYPE == torch.float32
    assert impl.PROVIDERS == ("liger", "huggingface")
    assert impl.OUTPUT_NAMES == ("loss",) and impl.GRAD_INPUTS == ("weight", "bias")
    assert impl.DETERMINISTIC_INPUTS == () and impl.IMPLIED == {}
    with pytest.raises(Unavailable):
        impl.build("no_such_provider", impl.make_inputs(DPO_CASES[0], "fp32", 1, "cpu"), DPO_CASES[0])
    with pytest.raises(ValueError, match="bias"):
        impl.make_inputs({**DPO_CASES[0], "bias": False}, "fp32", 1, "cpu")
    with pytest.raises(ValueError, match="even number of sequences"):
        impl.make_inputs({**DPO_CASES[0], "batch": 3}, "fp32", 1, "cpu")


def test_dpo_published_workloads_keep_their_bytes():
    """The spec changes no published byte: the generic title, the parameters as stored, inputs "unknown"."""
    from kernelindex_pipeline.core.documents import workload_definition

    params, digest = DPO_PUBLISHED
    w = workload_definition(DPO, dict(params), "bf16")
    assert w["workload_digest"] == digest
    assert w["definition"]["spec"]["inputs"] == "unknown"
    assert w["definition"]["metadata"]["title"].startswith("Dpo loss · ")
    assert w["known_kernel"] and w["shapes_known"]
    spec = kernels.lookup(DPO)
    assert spec.title == "Dpo loss" and not spec.shapes_published
    assert spec.parameter_names == {} and spec.defaults == {} and spec.implied == ()


@pytest.mark.parametrize("params", DPO_CASES, ids=DPO_IDS)
def test_dpo_inputs_are_seeded_with_spec_shapes(params):
    impl = load_adapter(DPO)
    a, b, c, spec = ac.seeded_inputs(impl, DPO, params)
    assert set(a) == {t["name"] for t in spec} == {"x", "weight", "bias", "target", "ref_x", "ref_weight"}
    for t in spec:
        ac.assert_seeded_tensor(a[t["name"]], t, b[t["name"]], c[t["name"]])
    rows = params["batch"] * params["seq"]
    ignored = a["target"] == params["ignore_index"]
    assert 1 <= int(ignored.sum()) < rows // 2
    assert not torch.equal(a["ref_x"], a["x"]) and not torch.equal(a["ref_weight"], a["weight"])
    for seed in (*SEEDS, 5, 6):
        target = impl.make_inputs(params, "fp32", seed, "cpu")["target"].view(params["batch"], params["seq"])
        assert bool(((target != params["ignore_index"]).sum(-1) > 0).all()), seed


@pytest.mark.parametrize("params", DPO_CASES, ids=DPO_IDS)
def test_dpo_cost_model_counts_both_heads_and_the_weight_gradient(params):
    impl = load_adapter(DPO)
    f = ac.check_floors(impl, params)
    shapes = impl.matmul_shapes(params)
    gemm_flops = sum(2 * m * n * k for m, n, k in shapes)
    assert len(shapes) == 3 and gemm_flops <= f["full"] < 1.5 * gemm_flops
    rows, hidden, vocab = params["batch"] * params["seq"], params["hidden"], params["vocab"]
    reads = (2 * (rows * hidden + vocab * hidden) + vocab) * 2 + rows * 8
    assert impl.bytes_moved(params, "bf16", "forward") == reads + 4
    assert impl.bytes_moved(params, "bf16", "backward") == reads + (vocab * hidden + vocab) * 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("params", DPO_CASES, ids=DPO_IDS)
def test_dpo_providers_match_reference(params, dtype):
    impl = load_adapter(DPO)
    providers = _dpo_providers_here()
    result = check_correctness(impl, providers, params, dtype, "cpu", seeds=SEEDS)
    for provider in providers:
        ac.assert_passed(impl, provider, result[provider])
    if "liger" not in providers:
        pytest.skip(f"liger not checked at {dtype}: liger_kernel is not installed")
    assert "eager" in result["liger"]["label"]


def test_dpo_providers_compute_the_same_loss():
    """Both upstream providers average the log-probabilities and take the sigmoid loss's mean over pairs: at
    float32 the huggingface baseline equals the reference loss and its gradients, and Liger's does too."""
    from kernels.dpo_loss.loss import dpo_loss

    impl = load_adapter(DPO)
    params = DPO_CASES[1]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    weight, bias = (inputs[n].clone().requires_grad_(True) for n in ("weight", "bias"))
    b, s, h = params["batch"], params["seq"], params["hidden"]
    want = dpo_loss(inputs["x"].view(b, s, h), weight, bias, inputs["ref_x"].view(b, s, h), inputs["ref_weight"],
                    None, inputs["target"].view(b, s), beta=0.1, ignore_index=42)
    want_grads = torch.autograd.grad(want, [weight, bias])
    for provider in _dpo_providers_here():
        built = impl.build(provider, inputs, params)
        (loss,) = built.fn()
        grads = torch.autograd.grad(loss, [built.leaves["weight"], built.leaves["bias"]])
        torch.testing.assert_close(loss, want)
        for got, expected in zip(grads, want_grads):
            torch.testing.assert_close(got, expected)


def test_dpo_loss_is_paired_over_chosen_then_rejected_halves_with_a_constant_reference():
    """Swapping the chosen and rejected halves changes the loss; the ignored tokens do not count; the
    reference head's inputs move the loss but take no gradient."""
    impl = load_adapter(DPO)
    params = DPO_CASES[0]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    half = inputs["x"].shape[0] // 2
    rows = ("x", "ref_x", "target")
    swapped = {n: (torch.cat([t[half:], t[:half]]) if n in rows else t) for n, t in inputs.items()}
    (loss,) = impl.reference(inputs, params)
    (loss_swapped,) = impl.reference(swapped, params)
    assert not torch.allclose(loss, loss_swapped)
    ignored = inputs["target"] == params["ignore_index"]
    moved = torch.where(ignored.unsqueeze(1), inputs["x"] + 1.0, inputs["x"])
    (same,) = impl.reference({**inputs, "x": moved}, params)
    torch.testing.assert_close(loss, same)
    leaves = {n: inputs[n].clone().requires_grad_(True) for n in ("weight", "ref_x", "ref_weight")}
    (other_ref,) = impl.reference({**inputs, **leaves, "ref_x": leaves["ref_x"] * 0.5}, params)
    assert not torch.allclose(loss, other_ref.detach())
    grads = torch.autograd.grad(other_ref, list(leaves.values()), allow_unused=True)
    assert grads[0] is not None and grads[1] is None and grads[2] is None


@pytest.mark.parametrize("how", ["outputs", "gradients"])
def test_dpo_comparison_catches_planted_wrong_provider(how):
    impl = load_adapter(DPO)
    provider = "liger" if ac.have_liger() else "huggingface"
    ac.check_planted(impl, provider, DPO_CASES[0], how)


def test_dpo_liger_runs_without_the_interpreter(monkeypatch):
    """Liger's DPO loss is plain PyTorch: off CUDA it builds without TRITON_INTERPRET, eager."""
    if not ac.have_liger():
        pytest.skip("liger_kernel is not installed")
    impl = load_adapter(DPO)
    inputs = impl.make_inputs(DPO_CASES[0], "fp32", 1, "cpu")
    monkeypatch.delenv("TRITON_INTERPRET")
    built = impl.build("liger", inputs, DPO_CASES[0])
    assert "eager" in built.label and torch.isfinite(built.fn()[0])
