"""Rerun adapter of the fused linear KTO loss (``kernels/kto_loss``), on the CPU.

The adapter is checked against the contract, for seeded inputs with the spec's shapes (and the extra inputs
benchmark_kto_loss.py builds: the biases, the reference head and its hidden states, the preference labels
and kl), and for every provider against its float32 reference through the harness's own comparison; a
planted wrong provider must fail that comparison. Liger's ``LigerFusedLinearKTOLoss`` is plain chunked
PyTorch (no Triton), so both providers run here, at float32 and bfloat16; only ``torch.compile``, which the
adapter keeps on CUDA, is left out (eager off CUDA: Inductor's CPU build of every chunk takes tens of
seconds and computes the same loss). The huggingface baseline computes a different loss (averaged
log-probabilities) and is checked to fail for that reason and to equal that other loss.
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

KERNEL = "kto_loss"
LOSS = {"beta": 0.1, "bias": True, "ignore_index": 42, "mode": "forward"}
# Small shapes with odd vocabularies and sequences of odd length; the source workloads' parameters besides.
CASES = [{"batch": 2, "seq": 7, "hidden": 32, "vocab": 301, **LOSS},
         {"batch": 3, "seq": 5, "hidden": 16, "vocab": 200, **LOSS}]
EXTRA = {"bias", "ref_x", "ref_weight", "ref_bias", "preference_labels", "kl"}
# Upstream's own baseline fails the comparison, for a reason of its own, at every dtype.
BASELINE_FAILS = ("benchmark_kto_loss.py builds LigerFusedLinearKTOLoss at average_log_prob=False (summed "
                  "log-probabilities) but calls HFKTOLoss.get_batch_loss_metrics at its default "
                  "average_log_prob=True: a different loss")


def test_adapter_satisfies_contract():
    impl = ac.load_checked(KERNEL)
    assert impl.REFERENCE_DTYPE == torch.float32
    assert impl.PROVIDERS == ("liger", "huggingface")
    assert impl.GRAD_INPUTS == ("weight", "bias")
    assert impl.DETERMINISTIC_INPUTS == () and impl.IMPLIED == {}
    with pytest.raises(Unavailable):
        impl.build("no_such_provider", impl.make_inputs(CASES[0], "fp32", 1, "cpu"), CASES[0])
    with pytest.raises(ValueError, match="bias"):
        impl.make_inputs({**CASES[0], "bias": False}, "fp32", 1, "cpu")


@pytest.mark.parametrize("params", CASES, ids=["case0", "case1"])
def test_inputs_are_seeded_with_spec_shapes(params):
    impl = load_adapter(KERNEL)
    a, b, c, spec = ac.seeded_inputs(impl, KERNEL, params)
    assert set(a) == {t["name"] for t in spec} | EXTRA
    for t in spec:
        ac.assert_seeded_tensor(a[t["name"]], t, b[t["name"]], c[t["name"]])
    rows, hidden, vocab = params["batch"] * params["seq"], params["hidden"], params["vocab"]
    shapes = {"bias": [vocab], "ref_x": [rows, hidden], "ref_weight": [vocab, hidden], "ref_bias": [vocab], "kl": [1]}
    for name, shape in shapes.items():
        ac.assert_seeded_tensor(a[name], {"shape": shape, "dtype": "bf16"}, b[name], c[name])
    labels = a["preference_labels"]
    assert labels.dtype == torch.bool and list(labels.shape) == [params["batch"]]
    assert torch.equal(labels, b["preference_labels"])
    ignored = int((a["target"] == params["ignore_index"]).sum())
    assert 1 <= ignored <= rows // 2
    assert not torch.equal(a["ref_x"], a["x"]) and not torch.equal(a["ref_weight"], a["weight"])


@pytest.mark.parametrize("params", CASES, ids=["case0", "case1"])
def test_cost_model_counts_the_lm_head_gemms(params):
    impl = load_adapter(KERNEL)
    f = ac.check_floors(impl, params)
    shapes = impl.matmul_shapes(params)
    gemm_flops = sum(2 * m * n * k for m, n, k in shapes)
    assert len(shapes) == 3 and gemm_flops <= f["full"] < 1.5 * gemm_flops


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("params", CASES, ids=["case0", "case1"])
def test_liger_matches_reference(params, dtype):
    impl = load_adapter(KERNEL)
    if not ac.have_liger():
        pytest.skip("liger_kernel missing")
    result = check_correctness(impl, ["liger"], params, dtype, "cpu", seeds=SEEDS)
    ac.assert_passed(impl, "liger", result["liger"])
    assert "eager" in result["liger"]["label"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_upstream_baseline_fails(dtype):
    """The huggingface baseline fails for the stated reason, so that a fixed upstream script shows up: even the
    field's rule, which lets the eager baseline set its dtype's level, fails it (it computes another loss)."""
    impl = load_adapter(KERNEL)
    res = check_correctness(impl, ["huggingface"], CASES[0], dtype, "cpu", seeds=SEEDS)["huggingface"]
    assert res["status"] == "failed", BASELINE_FAILS
    assert "gradient weight" in res["reason"] and "10x that for the eager baseline" in res["reason"]


def test_baseline_is_the_averaged_log_prob_kto_loss():
    """The huggingface provider equals KTO on averaged log-probabilities, and its weight gradient too."""
    from kernels.kto_loss.loss import kto_loss

    impl = load_adapter(KERNEL)
    params = CASES[0]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    built = impl.build("huggingface", inputs, params)
    (baseline,) = built.fn()
    (grad,) = torch.autograd.grad(baseline, [built.leaves["weight"]])
    weight = inputs["weight"].clone().requires_grad_(True)
    b, s, h = params["batch"], params["seq"], params["hidden"]
    averaged = kto_loss(inputs["x"].view(b, s, h), weight, inputs["bias"], inputs["ref_x"].view(b, s, h),
                        inputs["ref_weight"], inputs["ref_bias"], inputs["target"].view(b, s),
                        inputs["preference_labels"], inputs["kl"], beta=0.1, ignore_index=42, average=True)
    (want,) = torch.autograd.grad(averaged, [weight])
    torch.testing.assert_close(baseline, averaged)
    torch.testing.assert_close(grad, want)
    (summed,) = impl.reference(inputs, params)
    assert not torch.allclose(baseline, summed)


def test_loss_follows_preference_labels_and_kl():
    """Flipping the labels or shifting kl changes the reference loss; the ignored tokens do not count."""
    impl = load_adapter(KERNEL)
    params = CASES[0]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    (loss,) = impl.reference(inputs, params)
    (flipped,) = impl.reference({**inputs, "preference_labels": ~inputs["preference_labels"]}, params)
    (shifted,) = impl.reference({**inputs, "kl": inputs["kl"] + 1.0}, params)
    assert not torch.allclose(loss, flipped) and not torch.allclose(loss, shifted)
    ignored = inputs["target"] == params["ignore_index"]
    assert ignored.any()
    moved = torch.where(ignored.unsqueeze(1), inputs["x"] + 1.0, inputs["x"])
    (same,) = impl.reference({**inputs, "x": moved}, params)
    torch.testing.assert_close(loss, same)


@pytest.mark.parametrize("how", ["outputs", "gradients"])
def test_comparison_catches_planted_wrong_provider(how):
    impl = load_adapter(KERNEL)
    provider = "liger" if ac.have_liger() else "huggingface"
    ac.check_planted(impl, provider, CASES[0], how)
