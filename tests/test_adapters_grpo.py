"""Rerun adapters of the fused linear GRPO loss (token- and sequence-level importance sampling), on the CPU.

Each adapter is checked against the contract, for seeded inputs with the shapes it derives from the
parameters (the specs give none), and for both providers against its float32 reference through the
harness's own comparison; a planted wrong provider must fail that comparison. Liger's
``LigerFusedLinearGRPOLoss`` is plain chunked PyTorch (no Triton), so it runs here, eager: on CUDA the
adapter compiles its loss math with ``torch.compile`` as upstream does, which is not checked here.
"""

from __future__ import annotations

import adapter_checks as ac  # first: sets TRITON_INTERPRET before triton is imported
import pytest
from kernelindex_pipeline.core.documents import workload_definition
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

LEVELS = {"fused_linear_grpo_loss_token": "token", "fused_linear_grpo_loss_sequence": "sequence"}
# Small shapes with odd sizes; the canonical parameters name the level. The second vocabulary is past Liger's
# 4096-logit vocab chunk, so that its streamed log-softmax crosses a chunk boundary.
CASES = {kernel: [{"batch": 2, "seq": 7, "hidden": 32, "vocab": 301, "importance_sampling_level": level},
                  {"batch": 3, "seq": 5, "hidden": 16, "vocab": 4099}]
         for kernel, level in LEVELS.items()}
KERNELS, ALL_CASES, CASE_IDS = ac.case_table(CASES)
CANONICAL = {"batch": 4, "seq": 1024, "hidden": 4096, "vocab": 128256}


def _shapes(params: dict) -> dict[str, tuple[list[int], torch.dtype | None]]:
    """{input: (shape, dtype)}: None for the workload's dtype."""
    b, t, h, v = (params[k] for k in ("batch", "seq", "hidden", "vocab"))
    return {"x": ([b, t, h], None), "weight": ([v, h], None), "selected_token_ids": ([b, t], torch.int64),
            "attention_mask": ([b, t], torch.float32), "advantages": ([b], None), "ref_input": ([b, t, h], None),
            "ref_weight": ([v, h], None)}


@pytest.mark.parametrize("kernel", KERNELS)
def test_adapter_satisfies_contract(kernel):
    impl = ac.load_checked(kernel)
    # Published with their inputs unknown; the spec's shapes size the reruns only.
    assert workload_definition(kernel, CASES[kernel][0], "bf16")["definition"]["spec"]["inputs"] == "unknown"
    assert impl.REFERENCE_DTYPE == torch.float32
    assert impl.PROVIDERS == ("liger", "torch")
    assert impl.GRAD_INPUTS == ("x", "weight")
    assert impl.DETERMINISTIC_INPUTS == ("attention_mask",)
    assert impl.IMPLIED == {}
    params = CASES[kernel][0]
    with pytest.raises(Unavailable):
        impl.build("no_such_provider", impl.make_inputs(params, "fp32", 1, "cpu"), params)


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_workload_of_the_other_level_is_refused(kernel):
    impl = load_adapter(kernel)
    other = next(level for level in LEVELS.values() if level != LEVELS[kernel])
    with pytest.raises(ValueError, match="importance_sampling_level"):
        impl.make_inputs({**CASES[kernel][0], "importance_sampling_level": other}, "fp32", 1, "cpu")


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_inputs_are_seeded_with_the_derived_shapes(kernel, params):
    impl = load_adapter(kernel)
    a = impl.make_inputs(params, "bf16", 5, "cpu")
    b = impl.make_inputs(params, "bf16", 5, "cpu")
    c = impl.make_inputs(params, "bf16", 6, "cpu")
    shapes = _shapes(params)
    assert set(a) == set(shapes)
    for name, (shape, dtype) in shapes.items():
        x = a[name]
        assert list(x.shape) == shape and x.dtype == (dtype or torch.bfloat16), name
        assert torch.count_nonzero(x) > 0 and torch.equal(x, b[name])
        assert torch.equal(x, c[name]) == (name in impl.DETERMINISTIC_INPUTS), name
    assert bool((a["attention_mask"] == 1).all())
    assert not torch.equal(a["weight"], a["ref_weight"]) and not torch.equal(a["x"], a["ref_input"])
    assert int(a["selected_token_ids"].min()) >= 0 and int(a["selected_token_ids"].max()) < params["vocab"]


@pytest.mark.parametrize("kernel", KERNELS)
def test_cost_model_counts_both_heads(kernel):
    impl = load_adapter(kernel)
    params = {**CANONICAL, "importance_sampling_level": LEVELS[kernel]}
    f = ac.check_floors(impl, params)
    rows, h, v = CANONICAL["batch"] * CANONICAL["seq"], CANONICAL["hidden"], CANONICAL["vocab"]
    assert impl.matmul_shapes(params) == [(rows, v, h), (rows, h, v), (v, h, rows), (rows, v, h)]
    gemm_flops = sum(2 * m * n * k for m, n, k in impl.matmul_shapes(params))
    assert gemm_flops <= f["full"] < 1.01 * gemm_flops
    # Forward reads both heads' x and weight, the ids, mask and advantages, and writes the loss.
    assert impl.bytes_moved(params, "bf16", "forward") == 2 * 2 * (rows * h + v * h) + rows * (8 + 4) + 4 * 2 + 4


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_providers_match_reference(kernel, params, dtype):
    impl = load_adapter(kernel)
    providers = [p for p in impl.PROVIDERS if p != "liger" or ac.have_liger()]
    result = check_correctness(impl, providers, params, dtype, "cpu", seeds=SEEDS)
    for provider in providers:
        ac.assert_passed(impl, provider, result[provider])
    if "liger" not in providers:
        pytest.skip("liger not checked: liger_kernel missing")
    assert "eager" in result["liger"]["label"] and LEVELS[kernel] in result["torch"]["label"]


@pytest.mark.parametrize("how", ["outputs", "gradients"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_comparison_catches_planted_wrong_provider(kernel, how):
    impl = load_adapter(kernel)
    ac.check_planted(impl, "liger" if ac.have_liger() else "torch", CASES[kernel][0], how)


@pytest.mark.parametrize("kernel", KERNELS)
def test_liger_gets_the_scripts_settings(kernel, monkeypatch):
    """LigerLMHeadGRPO's defaults (bnpo, beta 0.1, a reference model) and the family's level reach Liger."""
    if not ac.have_liger():
        pytest.skip("liger_kernel missing")
    from liger_kernel.chunked_loss import grpo_loss

    seen = {}

    class Recording(grpo_loss.LigerFusedLinearGRPOLoss):
        def __init__(self, **kwargs):
            seen.update(kwargs)
            super().__init__(**kwargs)

    monkeypatch.setattr(grpo_loss, "LigerFusedLinearGRPOLoss", Recording)
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    impl.build("liger", impl.make_inputs(params, "fp32", 1, "cpu"), params)
    assert seen["importance_sampling_level"] == LEVELS[kernel]
    assert (seen["loss_type"], seen["beta"], seen["use_ref_model"], seen["compiled"]) == ("bnpo", 0.1, True, False)


def test_the_levels_agree_on_the_scripts_inputs():
    """With no old log-probabilities every ratio is 1: both levels give the same loss and gradients."""
    token, sequence = (load_adapter(k) for k in LEVELS)
    params = CASES["fused_linear_grpo_loss_token"][1]
    inputs = token.make_inputs(params, "fp32", 3, "cpu")
    inputs["attention_mask"][0, -2:] = 0
    results = []
    for impl in (token, sequence):
        leaves = {n: inputs[n].clone().requires_grad_(True) for n in impl.GRAD_INPUTS}
        (loss,) = impl.reference({**inputs, **leaves}, params)
        results.append((loss, *torch.autograd.grad(loss, list(leaves.values()))))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_release_whose_class_predates_the_level_is_unavailable(kernel, monkeypatch):
    """Liger-Kernel 0.6.1's LigerFusedLinearGRPOLoss takes no ``importance_sampling_level``: at such a release the
    provider is unavailable with that reason, where building it would raise a TypeError mid-check."""
    if not ac.have_liger():
        pytest.skip("liger_kernel missing")
    from liger_kernel.chunked_loss import grpo_loss

    class BeforeTheLevel(grpo_loss.LigerFusedLinearGRPOLoss):
        def __init__(self, beta=0.1, compiled=True, use_ref_model=True, epsilon_low=0.2, epsilon_high=0.2,
                     loss_type="bnpo", temperature=1.0):
            super().__init__(beta=beta, compiled=compiled, use_ref_model=use_ref_model, epsilon_low=epsilon_low,
                             epsilon_high=epsilon_high, loss_type=loss_type, temperature=temperature)

    monkeypatch.setattr(grpo_loss, "LigerFusedLinearGRPOLoss", BeforeTheLevel)
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    with pytest.raises(Unavailable, match="takes no importance_sampling_level"):
        impl.build("liger", inputs, params)
    impl.build("torch", inputs, params)
