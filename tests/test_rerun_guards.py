"""Providers that are what their label says, and targets that end: a torch.compile provider that fell back
to eager, or a Liger backend that ran Liger's default kernels, is failed with that reason; the project's own
torch.compile provider compiles afresh for every workload; a target past its time is recorded as `timeout`
while the session goes on. On the CPU, under inductor and Triton's interpreter."""

from __future__ import annotations

import adapter_checks  # noqa: F401 - first: sets TRITON_INTERPRET before triton is imported

import time

import pytest
import torch

from kernels.adapter import Built, load_adapter
from kernelindex_pipeline.core import reasons
from kernelindex_pipeline.gpu import measure
from kernelindex_pipeline.gpu.guards import backend_fell_back, backend_report, compile_report, fell_back
from kernelindex_pipeline.gpu.correctness import check_correctness

DYT = load_adapter("dyt")
PARAMS = {"beta": False, "hidden": 64, "tokens": 8}


def _dyt(x, alpha, gamma):
    return gamma * torch.tanh(alpha * x)


def _upstream_style(shared):
    """A torch_compile provider built the way a script that compiles once for many shapes builds it: one
    compiled function, reused, never reset."""

    def build(provider, inputs, params):
        if provider != "torch_compile":
            return DYT.build(provider, inputs, params)
        leaves = {name: inputs[name].detach().clone().float().requires_grad_(True) for name in ("x", "alpha", "gamma")}
        return Built(lambda: (shared(leaves["x"], leaves["alpha"], leaves["gamma"]),), leaves, "torch.compile", ("y",))

    return build


def test_a_torch_compile_provider_past_dynamos_recompile_limit_is_failed_as_fallen_back():
    torch._dynamo.reset()
    shared = torch.compile(_dyt)
    with torch._dynamo.config.patch(recompile_limit=1):
        for hidden in (16, 32):  # an earlier workload of the same script, then one past the limit
            shared(torch.randn(4, hidden), torch.ones(1), torch.ones(hidden))
        result = check_correctness(DYT, ["torch", "torch_compile"], PARAMS, "fp32", "cpu", seeds=(1,),
                                   build=_upstream_style(shared))
    assert result["torch"]["status"] == "passed"
    compiled = result["torch_compile"]
    assert compiled["status"] == "failed" and compiled["code"] == reasons.FELL_BACK, compiled
    assert compiled["reason"].startswith("torch.compile fell back to eager")
    assert compiled["compile"]["frames_compiled"] < compiled["compile"]["frames"]
    # Its outputs were right: only the guard can tell that it ran eager.
    assert all(v["rel_error"] <= v["tolerance"] for v in compiled["outputs"].values())


def test_the_projects_torch_compile_provider_compiles_afresh_for_each_workload():
    torch._dynamo.reset()
    with torch._dynamo.config.patch(recompile_limit=1):
        for hidden in (16, 32):
            torch.compile(_dyt)(torch.randn(4, hidden), torch.ones(1), torch.ones(hidden))
        result = check_correctness(DYT, ["torch_compile"], PARAMS, "fp32", "cpu", seeds=(1, 2))
    compiled = result["torch_compile"]
    if compiled["status"] == "unavailable":
        pytest.skip(compiled["reason"])  # inductor needs a C++ toolchain on the CPU
    assert compiled["status"] == "passed", compiled
    report = compiled["compile"]
    assert report["graphs"] >= 1 and report["frames_compiled"] == report["frames"] and fell_back(report) is None
    assert report["torch"] == torch.__version__ and report["backend"] == "inductor"


def test_compile_report_reads_dynamos_own_counters():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    assert fell_back(compile_report()) == "torch.compile fell back to eager: dynamo compiled no graph"


SOFTMAX = load_adapter("softmax")
SOFTMAX_PARAMS = {"rows": 9, "cols": 300}


def test_a_liger_backend_that_ran_liger_s_default_kernels_is_caught():
    """Liger keeps its Triton Function for an op a backend lacks. The Functions in the autograd graph of the
    outputs say which ran: here Liger's default softmax, though the cuTile backend was asked for."""
    inputs = SOFTMAX.make_inputs(SOFTMAX_PARAMS, "fp32", 1, "cpu")
    outs = SOFTMAX.build("liger", inputs, SOFTMAX_PARAMS).fn()
    report = backend_report(outs, "cutile")
    assert report["functions"] == ["liger_kernel.ops.softmax.LigerSoftmaxFunction"]
    assert report["package"].startswith("liger_kernel.ops") and "cutile" in report["package"]
    reason = backend_fell_back(report)
    assert reason.startswith("Liger-Kernel's cutile backend has none of this op's Functions; its default ran")
    ran_on_backend = dict(report, functions=[f"{report['package']}.softmax.LigerSoftmaxFunction"])
    assert backend_fell_back(ran_on_backend) is None
    assert backend_fell_back(backend_report(outs, "no-such-backend")).startswith("Liger-Kernel has no backend")


def test_the_liger_backend_guard_fails_the_provider_in_the_correctness_check():
    from kernelindex_pipeline.gpu.rerun import with_aliases

    impl = with_aliases(SOFTMAX, {"liger_cutile": "liger"})
    result = check_correctness(impl, ["liger_cutile", "liger"], SOFTMAX_PARAMS, "fp32", "cpu", seeds=(1,))
    assert result["liger"]["status"] == "passed" and "backend" not in result["liger"]
    tagged = result["liger_cutile"]
    assert tagged["status"] == "failed" and tagged["code"] == reasons.FELL_BACK, tagged
    assert tagged["backend"]["functions"] == ["liger_kernel.ops.softmax.LigerSoftmaxFunction"]


class _Slow:
    """DyT's adapter whose torch provider takes longer than the target may."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __getattr__(self, name):
        return getattr(DYT, name)

    def build(self, provider, inputs, params):
        built = DYT.build(provider, inputs, params)
        if provider != "torch":
            return built

        def slow():
            time.sleep(self.seconds)
            return built.fn()

        return Built(slow, built.leaves, built.label, built.output_names)


def test_a_target_past_its_time_is_recorded_as_timeout_and_the_session_goes_on():
    target = {"kernel": "dyt", "params": PARAMS, "dtype": "fp32", "providers": ["torch"],
              "unavailable": {"liger_cutile": "no rerun provider for liger_cutile"},
              "modes": ["forward"], "metrics": ["latency"]}
    started = time.monotonic()
    outcomes, stats = measure.measure_target(target, _Slow(2.0), 1 << 40, log=lambda *_: None, device="cpu",
                                           timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert outcomes["torch"]["status"] == "timeout" and outcomes["torch"]["code"] == reasons.TIMEOUT
    assert "did not finish within 0.5 s" in outcomes["torch"]["reason"] and outcomes["torch"]["elapsed_s"] >= 0.5
    assert outcomes["liger_cutile"]["code"] == reasons.NO_RERUN_PROVIDER
    assert all(not per_provider for per_provider in stats.values())
    # The next target measures as it would have: no alarm is left behind.
    ok = {**target, "unavailable": {}, "metrics": []}
    outcomes, _ = measure.measure_target(ok, _Slow(0.0), 1 << 40, log=lambda *_: None, device="cpu", timeout_s=30)
    assert outcomes["torch"]["status"] == "passed"
    time.sleep(0.6)


MEGATRON_CE = {"batch": 1, "seq": 32, "tensor_parallel": 1, "vocab": 256}


@pytest.fixture
def megatron_fused_steps():
    """Megatron-Core's fused cross entropy module, reloaded after each test with its own `jit_fuser`."""
    import importlib

    pytest.importorskip("megatron.core", reason="megatron-core is a `baselines` extra; .ci/run installs it")
    jit = importlib.import_module("megatron.core.jit")
    fused = importlib.import_module("megatron.core.fusions.fused_cross_entropy")
    compiler = jit.jit_fuser
    yield jit, fused
    jit.jit_fuser = compiler
    importlib.reload(fused)


def test_megatrons_fused_cross_entropy_is_checked_as_the_compiled_provider_it_is(megatron_fused_steps):
    jit, fused = megatron_fused_steps
    assert jit.jit_fuser is torch.compile
    adapter = load_adapter("megatron_cross_entropy")
    result = check_correctness(adapter, ["megatron-fused"], MEGATRON_CE, "bf16", "cpu", seeds=(1,))["megatron-fused"]
    assert result["status"] == "passed", result
    assert result["compile"]["graphs"] > 0 and result["compile"]["frames_compiled"] == result["compile"]["frames"]


def test_megatrons_fused_cross_entropy_without_a_compiler_is_failed_as_fallen_back(megatron_fused_steps):
    """Where Megatron finds no usable compiler its `jit_fuser` is a no-op and the "fused" path is its eager one."""
    import importlib

    jit, fused = megatron_fused_steps
    jit.jit_fuser = lambda fn: fn
    importlib.reload(fused)
    adapter = load_adapter("megatron_cross_entropy")
    result = check_correctness(adapter, ["megatron-fused", "torch"], MEGATRON_CE, "bf16", "cpu", seeds=(1,))
    assert result["torch"]["status"] == "passed"
    fell = result["megatron-fused"]
    assert fell["status"] == "failed" and fell["code"] == reasons.FELL_BACK, fell
    assert fell["compile"]["graphs"] == 0
    # Its outputs were right: only the guard tells that nothing was fused.
    assert all(v["rel_error"] <= v["tolerance"] for v in fell["outputs"].values())
