"""Rerun adapters of the tiled gated MLPs, the fused mixture-of-experts and Megatron's cross entropy, on the CPU
under Triton's interpreter.

Each adapter is checked against the contract, for seeded inputs with the spec's shapes, and for every
provider that runs here against its reference through the harness's own comparison; a planted wrong provider
must fail that comparison. TRITON_INTERPRET must be set before triton is imported, and Liger's fused-MoE
autotuning (which the interpreter cannot run) pinned before liger_kernel's MoE kernels are imported, so this
module sets both first (TRITON_INTERPRET through ``adapter_checks``).
"""

from __future__ import annotations

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
# Whether Liger's MoE kernels will be pinned to one launch config: not if another test module imported them first.
MOE_AUTOTUNE_PINNED = ("liger_kernel.ops.fused_moe_kernels" not in sys.modules
                       or os.environ.get("LIGER_FUSED_MOE_AUTOTUNE") == "0")
if "liger_kernel.ops.fused_moe_kernels" not in sys.modules:
    os.environ["LIGER_FUSED_MOE_AUTOTUNE"] = "0"

import importlib  # noqa: E402
import importlib.util  # noqa: E402
import math  # noqa: E402

import adapter_checks as ac  # noqa: E402 (sets TRITON_INTERPRET too)
import pytest  # noqa: E402
from adapter_checks import (  # noqa: E402, F401 (the autouse fixture)
    DTYPES,
    SEEDS,
    Unavailable,
    _quiet_liger_backend_probe,
    check_correctness,
    load_adapter,
    torch,
)

HAVE_LIGER = ac.have_liger()

# Small shapes; a sequence that the shards do not divide evenly, a token count with unequal expert loads.
CASES = {
    "tiled_swiglu": [{"batch": 2, "seq": 10, "hidden": 32, "intermediate": 48, "num_shards": 4}],
    "tiled_geglu": [{"batch": 1, "seq": 9, "hidden": 16, "intermediate": 40, "num_shards": 2},
                    {"batch": 2, "seq": 8, "hidden": 16, "intermediate": 24}],
    "fused_moe": [{"tokens": 16, "hidden": 32, "intermediate": 32, "experts": 4, "top_k": 2}],
    "megatron_cross_entropy": [{"seq": 5, "batch": 3, "vocab": 300, "tensor_parallel": 1},
                               {"seq": 4, "batch": 2, "vocab": 1000}],
}
KERNELS, ALL_CASES, CASE_IDS = ac.case_table(CASES)
MLPS = ("tiled_geglu", "tiled_swiglu")
LIGER_MLP_PROVIDERS = ("liger", "liger_triton", "liger_tiled")
MEGATRON_PROVIDERS = ("megatron-fused", "megatron-unfused", "megatron")
# The upstream baseline each planted-wrong check perturbs (one that runs on the CPU).
BASELINE = {"tiled_swiglu": "huggingface", "tiled_geglu": "huggingface", "fused_moe": "huggingface",
            "megatron_cross_entropy": "torch"}

_SILU_MUL = ("Triton's interpreter passes a float scalar argument as a Python float, and Liger's SiLU-mul "
             "kernel calls gate_multiplier.to(tl.float32) on it")
_GELU_MUL = ("Triton's interpreter gives no value for libdevice tanh, which Liger's GELU-mul kernel calls "
             "(1 + tanh(...) raises TypeError)")
# What Liger's Triton kernels cannot do under the interpreter: (kernel, dtype or None for every dtype) -> why.
INTERPRETER_LIMITS = {
    ("tiled_swiglu", None): _SILU_MUL,
    ("tiled_geglu", None): _GELU_MUL,
    ("fused_moe", "bf16"): ("Triton's interpreter (numpy) has no bfloat16 atomic_add, and Liger's MoE backward "
                            "adds the routing weights' gradient atomically in the input dtype"),
}
MOE_AUTOTUNE = ("Triton's autotuner cannot benchmark under the interpreter (no active driver), and another "
                "test module imported Liger's MoE kernels before LIGER_FUSED_MOE_AUTOTUNE=0 could pin them")


def _interpreter_limit(kernel: str, dtype: str) -> str | None:
    return ac.limit_for(INTERPRETER_LIMITS, kernel, dtype)


def _liger(provider: str) -> bool:
    return provider.startswith("liger")


def _liger_missing(kernel: str) -> str | None:
    """Why Liger's providers of ``kernel`` cannot run at all in this session; None when they can."""
    if not HAVE_LIGER:
        return "liger_kernel is not installed"
    if kernel == "fused_moe" and not MOE_AUTOTUNE_PINNED:
        return MOE_AUTOTUNE
    return None


def _liger_skip(kernel: str, dtype: str) -> str | None:
    """Why Liger's providers of ``kernel`` are not checked at ``dtype`` here; None when they are."""
    return _liger_missing(kernel) or _interpreter_limit(kernel, dtype)


@pytest.mark.parametrize("kernel", KERNELS)
def test_adapter_satisfies_contract(kernel):
    impl = ac.load_checked(kernel)
    assert "kernelindex" not in impl.PROVIDERS and "liger_cutile" not in impl.PROVIDERS
    assert impl.DETERMINISTIC_INPUTS == ()
    expected_reference = torch.float64 if kernel == "megatron_cross_entropy" else torch.float32
    assert impl.REFERENCE_DTYPE == expected_reference
    params = CASES[kernel][0]
    with pytest.raises(Unavailable):
        impl.build("no_such_provider", impl.make_inputs(params, "fp32", 1, "cpu"), params)


def test_implied_parameters_match_the_ingested_workloads():
    assert load_adapter("tiled_swiglu").IMPLIED == {"hidden_act": "silu", "activation_type": "swiglu"}
    assert load_adapter("tiled_geglu").IMPLIED == {"hidden_act": "gelu_pytorch_tanh", "activation_type": "geglu"}
    assert load_adapter("fused_moe").IMPLIED == {}
    assert load_adapter("megatron_cross_entropy").IMPLIED == {}


@pytest.mark.parametrize("kernel", KERNELS)
def test_inputs_are_seeded_with_spec_shapes(kernel):
    impl = load_adapter(kernel)
    for params in CASES[kernel]:
        a, b, c, spec = ac.seeded_inputs(impl, kernel, params)
        assert {t["name"] for t in spec} <= set(a)
        for t in spec:
            ac.assert_seeded_tensor(a[t["name"]], t, b[t["name"]], c[t["name"]])
        extra = set(a) - {t["name"] for t in spec}
        assert extra == ({"top_k_index", "top_k_weights"} if kernel == "fused_moe" else set())


def test_moe_routing_is_top_k_of_seeded_logits():
    impl = load_adapter("fused_moe")
    params = CASES["fused_moe"][0]
    a, b, c = (impl.make_inputs(params, "fp32", s, "cpu") for s in (5, 5, 6))
    index, weights = a["top_k_index"], a["top_k_weights"]
    assert index.dtype == torch.int32 and list(index.shape) == [params["tokens"], params["top_k"]]
    assert int(index.min()) >= 0 and int(index.max()) < params["experts"]
    assert all(len(set(row)) == params["top_k"] for row in index.tolist())
    assert torch.allclose(weights.sum(-1), torch.ones(params["tokens"]))
    assert bool((weights[:, 0] >= weights[:, 1]).all())
    assert torch.equal(index, b["top_k_index"]) and not torch.equal(index, c["top_k_index"])


@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_floors_are_positive_and_full_covers_each_pass(kernel, params):
    impl = load_adapter(kernel)
    ac.check_floors(impl, params)
    shapes = impl.matmul_shapes(params)
    if kernel == "megatron_cross_entropy":
        assert shapes == []
    else:
        assert shapes and all(len(s) == 3 and min(s) > 0 for s in shapes)


def test_moe_flops_count_the_routed_rows():
    impl = load_adapter("fused_moe")
    params = CASES["fused_moe"][0]
    rows = params["tokens"] * params["top_k"]
    assert impl.flops(params, "forward") == 6 * rows * params["hidden"] * params["intermediate"]
    assert impl.matmul_shapes(params)[0] == (rows // params["experts"], 2 * params["intermediate"], params["hidden"])


FUSED_MEGATRON = ("megatron-fused", "megatron")


def _fused_megatron_gradient_in_bfloat16() -> bool:
    """Whether megatron-core's fused cross entropy rounds its gradient of float32 logits to bfloat16."""
    impl = load_adapter("megatron_cross_entropy")
    params = {"seq": 2, "batch": 1, "vocab": 8, "tensor_parallel": 1}
    built = impl.build("megatron-fused", impl.make_inputs(params, "fp32", 0, "cpu"), params)
    (loss,) = built.fn()
    (grad,) = torch.autograd.grad(loss.sum(), [built.leaves["logits"]])
    return torch.equal(grad, grad.bfloat16().float())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel", "params"), ALL_CASES, ids=CASE_IDS)
def test_providers_match_reference(kernel, params, dtype):
    impl = load_adapter(kernel)
    skip_liger = _liger_skip(kernel, dtype)
    providers = [p for p in impl.PROVIDERS if not (_liger(p) and skip_liger)]
    result = check_correctness(impl, providers, params, dtype, "cpu", seeds=SEEDS)
    for provider in providers:
        res = result[provider]
        if provider in MEGATRON_PROVIDERS and importlib.util.find_spec("megatron") is None:
            assert res == {"status": "unavailable", "reason": res["reason"], "code": "unavailable_provider"}
            assert "megatron-core not importable" in res["reason"]
            continue
        if provider in FUSED_MEGATRON and dtype != "bf16" and _fused_megatron_gradient_in_bfloat16():
            # Releases that cast the fused path's gradient to bfloat16 whatever the logits' dtype: its
            # gradient is wrong at other dtypes, and the check says so.
            assert res["status"] == "failed" and res["reason"].startswith("gradient logits"), res
            continue
        ac.assert_passed(impl, provider, res)
    if skip_liger:
        pytest.skip(f"liger not checked at {dtype}: {skip_liger}")


def test_moe_liger_low_precision_in_fp16():
    """Where the interpreter keeps Liger's bf16 MoE backward out, fp16 exercises the same low-precision
    loads, stores and atomic adds."""
    why = _liger_skip("fused_moe", "fp16")
    if why:
        pytest.skip(why)
    impl = load_adapter("fused_moe")
    res = check_correctness(impl, ["liger"], CASES["fused_moe"][0], "fp16", "cpu", seeds=(1,))["liger"]
    assert res["status"] == "passed", res.get("reason")


class _TorchGatedMul(torch.autograd.Function):
    """PyTorch stand-in for Liger's SiLU-mul / GELU-mul Triton functions (``apply(a, b)``), which the
    interpreter cannot run, so that Liger's own tiled-MLP autograd function is still exercised here."""

    gelu = False

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _TorchGatedMul._act(a) * b

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        with torch.enable_grad():
            a_ = a.detach().requires_grad_(True)
            act = _TorchGatedMul._act(a_)
            (da,) = torch.autograd.grad(act, a_, dc * b)
        return da, dc * act.detach()

    @staticmethod
    def _act(a):
        return torch.nn.functional.gelu(a, approximate="tanh") if _TorchGatedMul.gelu else torch.nn.functional.silu(a)


@pytest.mark.parametrize("kernel", MLPS)
def test_liger_tiled_surfaces_weight_gradients(kernel, monkeypatch):
    """Liger's tiled MLP (its real ``LigerTiledMLPFunction``, the gated multiply swapped for PyTorch) matches
    the reference in outputs and all four gradients, which its backward leaves outside autograd's graph."""
    if not HAVE_LIGER:
        pytest.skip("liger_kernel is not installed")
    tiled_mlp = importlib.import_module("liger_kernel.transformers.tiled_mlp")
    monkeypatch.setattr(_TorchGatedMul, "gelu", kernel == "tiled_geglu")
    monkeypatch.setattr(tiled_mlp, "LigerSiLUMulFunction", _TorchGatedMul)
    monkeypatch.setattr(tiled_mlp, "LigerGELUMulFunction", _TorchGatedMul)
    impl = load_adapter(kernel)
    for params in CASES[kernel]:
        res = check_correctness(impl, ["liger_tiled"], params, "fp32", "cpu", seeds=(1,))["liger_tiled"]
        assert res["status"] == "passed", res.get("reason")
        assert set(res["gradients"]) == set(impl.GRAD_INPUTS)


@pytest.mark.parametrize("kernel", MLPS)
def test_tiled_backward_accumulates_each_gradient_once(kernel):
    """The harness's ``.backward()`` (repeated over one forward, as upstream's retain_graph=True) leaves each
    weight's gradient accumulated once per call, as an untiled MLP's would."""
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    tiled = impl.build("deepspeed_tiled", inputs, params)
    plain = impl.build("huggingface", inputs, params)
    y0 = plain.fn()[0]
    dy = torch.randn(y0.shape, generator=torch.Generator().manual_seed(7), dtype=y0.dtype)
    for built in (tiled, plain):
        (y,) = built.fn()
        y.backward(dy, retain_graph=True)
        y.backward(dy, retain_graph=True)
    # Each gradient is summed along the forward's reductions (hidden, then intermediate), the backward's over
    # the tokens, and once more by the second .backward(); tiling reorders those sums.
    tokens = math.prod(inputs["x"].shape[:-1])
    length = params["hidden"] + params["intermediate"] + tokens + 1
    for name in impl.GRAD_INPUTS:
        want = plain.leaves[name].grad
        atol = ac.reordering_tolerance(want.dtype, length, want.abs().max().item())
        torch.testing.assert_close(tiled.leaves[name].grad, want, rtol=0, atol=atol)


@pytest.mark.parametrize(("kernel", "dtype"), sorted((k, d or "fp32") for k, d in INTERPRETER_LIMITS))
def test_interpreter_limits_still_hold(kernel, dtype):
    """The Liger checks skipped above fail for the stated reason, so that a fixed interpreter shows up."""
    why = _liger_missing(kernel)
    if why:
        pytest.skip(why)
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    provider = "liger_tiled" if kernel in MLPS else "liger"
    res = check_correctness(impl, [provider], params, dtype, "cpu", seeds=(1,))[provider]
    assert res["status"] == "failed", _interpreter_limit(kernel, dtype)
    assert "InterpreterError" in res["reason"]


@pytest.mark.parametrize("how", ["outputs", "gradients"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_comparison_catches_planted_wrong_provider(kernel, how):
    impl = load_adapter(kernel)
    params = CASES[kernel][0]
    ac.check_planted(impl, BASELINE[kernel], params, how)


@pytest.mark.parametrize("kernel", KERNELS)
def test_liger_needs_cuda_outside_the_interpreter(kernel, monkeypatch):
    impl = load_adapter(kernel)
    ac.assert_liger_needs_cuda(impl, [p for p in impl.PROVIDERS if _liger(p)], CASES[kernel][0], monkeypatch)


def test_deepspeed_provider_names_what_runs():
    impl = load_adapter("tiled_swiglu")
    params = CASES["tiled_swiglu"][0]
    label = impl.build("deepspeed_tiled", impl.make_inputs(params, "fp32", 1, "cpu"), params).label
    if importlib.util.find_spec("deepspeed") is None:
        assert label.startswith("PyTorch equivalent of DeepSpeed v0.18.2 TiledMLP (deepspeed not importable")
    assert "num_shards=4" in label


def test_megatron_cross_entropy_takes_one_tensor_parallel_rank():
    impl = load_adapter("megatron_cross_entropy")
    with pytest.raises(ValueError, match="tensor_parallel 2"):
        impl.make_inputs({"seq": 4, "batch": 2, "vocab": 64, "tensor_parallel": 2}, "fp32", 1, "cpu")
    params = {"seq": 4, "batch": 2, "vocab": 64}
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    assert int(inputs["target"].max()) < 64
    (loss,) = impl.reference(inputs, params)
    assert loss.shape == (4, 2)
    assert impl.bytes_moved(params, "bf16", "forward") == 8 * 64 * 2 + 8 * 8 + 8 * 4
