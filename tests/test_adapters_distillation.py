"""Rerun adapters of the LM-head distillation losses (JSD, cosine similarity), on the CPU.

Each adapter is checked against the contract, for seeded inputs with the spec's shapes, and for every
provider against its float32 reference through the harness's own comparison; a planted wrong provider must
fail that comparison. Liger's chunked distillation losses are plain PyTorch (no Triton), so both providers
run here at float32 and bfloat16; what the CPU cannot check is their ``torch.compile``d form, which the
adapters use on CUDA only (eager here: Inductor's CPU build of every chunk shape takes tens of seconds).
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
    load_adapter,
    torch,
)

from kernels.engines.distillation import distill_loss

# The canonical parameters the source workloads carry, at tiny sizes; the second case spans two of Liger's
# 1024-token chunks (torch.chunk of 2053 rows into two), with a vocabulary no power of two.
CANONICAL = {"bias": False, "ignore_index": -100, "weight_hard_loss": 0.5, "weight_soft_loss": 0.5,
             "mode": "forward"}
SMALL = [{**CANONICAL, "tokens": 13, "hidden": 64, "vocab": 301}, {"tokens": 2053, "hidden": 32, "vocab": 97}]
CASES = {"distill_jsd_loss": SMALL, "distill_cosine_loss": SMALL}
KERNELS, ALL_CASES, CASE_IDS = ac.case_table(CASES)
BASELINE = "torch"

# Upstream's own baselines that the comparison fails, for a reason of theirs: (kernel, dtype) -> why.
COSINE_BETA = ("benchmark_distill_cosine_loss.py's torch provider is HFCosineLoss at its default beta 1.0, "
               "while its Liger call runs at Function.apply's default beta 0.5")
BASELINE_FAILS = {("distill_cosine_loss", "fp32"): COSINE_BETA, ("distill_cosine_loss", "bf16"): COSINE_BETA}


@pytest.mark.parametrize("kernel", KERNELS)
def test_adapter_satisfies_contract(kernel):
    impl = ac.load_checked(kernel)
    assert impl.REFERENCE_DTYPE == torch.float32
    assert impl.PROVIDERS == ("liger", "torch")
    assert impl.GRAD_INPUTS == ("student_x", "student_weight")
    assert impl.DETERMINISTIC_INPUTS == ()
    assert impl.IMPLIED == {}
    with pytest.raises(Unavailable):
        impl.build("no_such_provider", impl.make_inputs(SMALL[0], "fp32", 1, "cpu"), SMALL[0])


@pytest.mark.parametrize("kernel", KERNELS)
def test_inputs_are_seeded_with_spec_shapes(kernel):
    impl = load_adapter(kernel)
    for params in CASES[kernel]:
        a, b, c, spec = ac.seeded_inputs(impl, kernel, params)
        assert set(a) == {t["name"] for t in spec}
        for t in spec:
            ac.assert_seeded_tensor(a[t["name"]], t, b[t["name"]], c[t["name"]])
        assert a["student_x"].shape[1] * 2 == a["teacher_x"].shape[1]
        assert a["student_x"].min() >= 0 and a["teacher_x"].min() >= 0  # torch.rand, as the scripts draw them
        assert ((a["target"] >= 0) & (a["target"] < params["vocab"])).all()


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_workload_with_biases_is_refused(kernel):
    impl = load_adapter(kernel)
    with pytest.raises(ValueError, match="bias"):
        impl.make_inputs({**SMALL[0], "bias": True}, "fp32", 1, "cpu")


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_cost_model_counts_the_lm_head_gemms(kernel, params):
    impl = load_adapter(kernel)
    f = ac.check_floors(impl, params)
    shapes = impl.matmul_shapes(params)
    gemm_flops = sum(2 * m * n * k for m, n, k in shapes)
    assert len(shapes) == 4  # the student's logits and their two gradients; the teacher's logits
    assert shapes and gemm_flops <= f["full"] < 1.5 * gemm_flops


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_providers_match_reference(kernel, params, dtype):
    impl = load_adapter(kernel)
    providers = [p for p in impl.PROVIDERS if p != "liger" or ac.have_liger()]
    if (kernel, dtype) in BASELINE_FAILS:
        providers.remove(BASELINE)
    result = check_correctness(impl, providers, params, dtype, "cpu", seeds=SEEDS)
    for provider in providers:
        ac.assert_passed(impl, provider, result[provider])
    if "liger" not in providers:
        pytest.skip("liger not checked: liger_kernel missing")
    assert "eager" in result["liger"]["label"]


@pytest.mark.parametrize(("kernel", "dtype"), sorted(BASELINE_FAILS))
def test_upstream_baseline_failures(kernel, dtype):
    """The baselines left out above fail for the stated reason, so that a fixed upstream script shows up."""
    impl = load_adapter(kernel)
    res = check_correctness(impl, [BASELINE], SMALL[0], dtype, "cpu", seeds=SEEDS)[BASELINE]
    assert res["status"] == "failed", BASELINE_FAILS[(kernel, dtype)]


def test_cosine_baseline_is_the_loss_at_beta_one():
    """benchmark_distill_cosine_loss.py times HFCosineLoss at beta 1.0: Liger's loss at that beta."""
    impl = load_adapter("distill_cosine_loss")
    params = SMALL[0]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    (baseline,) = impl.build(BASELINE, inputs, params).fn()
    torch.testing.assert_close(baseline.detach(), distill_loss(inputs, params, "cosine", 1.0))


@pytest.mark.parametrize("kernel", KERNELS)
def test_ignored_targets_leave_the_loss(kernel):
    """Tokens whose target is ignore_index count in neither loss, in Liger's pass and the reference alike."""
    impl = load_adapter(kernel)
    params = SMALL[0]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    masked = {**inputs, "target": inputs["target"].clone()}
    masked["target"][::3] = params["ignore_index"]
    (full,) = impl.reference(inputs, params)
    (ref,) = impl.reference(masked, params)
    assert not torch.allclose(full, ref)
    providers = (["liger"] if ac.have_liger() else []) + ([BASELINE] if kernel == "distill_jsd_loss" else [])
    for provider in providers:
        (out,) = impl.build(provider, masked, params).fn()
        torch.testing.assert_close(out.detach(), ref.detach())
    masked["target"][:] = params["ignore_index"]
    (nothing,) = impl.reference(masked, params)
    assert nothing.item() == 0.0


@pytest.mark.parametrize("how", ["outputs", "gradients"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_comparison_catches_planted_wrong_provider(kernel, how):
    impl = load_adapter(kernel)
    provider = "liger" if ac.have_liger() else BASELINE
    ac.check_planted(impl, provider, SMALL[0], how)
