"""The timing harness on a CUDA device (skipped without one): a family whose backward overwrites what its
forward saved is timed under both protocols, each backward on a fresh forward's graph. Run on the device as
``python -m pytest --noconftest tests/test_harness_cuda.py``."""

from __future__ import annotations

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("TRITON_INTERPRET is set in this process: run this file on its own", allow_module_level=True)


def test_a_backward_that_consumes_its_graph_is_timed_under_both_protocols():
    from kernels.adapter import load_adapter
    from kernelindex_pipeline.gpu.harness import measure_latency, measure_replica

    impl = load_adapter("megatron_cross_entropy")
    providers = ["liger", "torch"] + (["megatron-unfused"] if importlib.util.find_spec("megatron") else [])
    target = {"kernel": impl.KERNEL, "params": {"batch": 2, "seq": 512, "tensor_parallel": 1, "vocab": 8192},
              "dtype": "bf16", "modes": ["forward", "backward", "full"]}
    device = measure_latency(impl, target, providers)
    replica = measure_replica(impl, target, providers)
    for p in providers:
        for stats in (device[p], replica[p]):
            assert all(stats[(m, "latency")]["median"] > 0 for m in target["modes"]), (p, stats)
        # Backward alone is timed without its forward; the replica's backward is forward and backward.
        assert device[p][("backward", "latency")]["median"] < device[p][("full", "latency")]["median"]


def test_the_session_measures_its_hosts_launch_floor_under_both_timers():
    from kernelindex_pipeline.gpu.launch_floor import measure_launch_floor

    floor = measure_launch_floor()
    for op in ("emptyTritonKernel", "oneElementTorchOp"):
        f = floor[op]
        # A pass that does nothing takes microseconds under either timer (the event pair's own cost under
        # device time; that plus whatever of the host's launch path the card waits for under do_bench).
        assert 0 < f["deviceP20Ns"] <= f["deviceMedianNs"] <= f["deviceP80Ns"] < 1_000_000, f
        assert 0 < f["replicaP20Ns"] <= f["replicaMedianNs"] <= f["replicaP80Ns"] < 1_000_000, f
    assert floor["host"]["kernelRelease"] and floor["host"]["virtualisation"]
