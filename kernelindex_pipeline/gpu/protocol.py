"""The rerun protocol: timing budget, statistics, correctness tolerances, as published in each record."""

from __future__ import annotations

import math

from kernelindex_pipeline.core import catalog
from kernelindex_pipeline.core.catalog import RERUN_FAMILY, SOURCE_REPLICA_FAMILY
from kernelindex_pipeline.core.identity import API_VERSION

# The passes the harness times: upstream's operation modes but its forward without autograd.
TIMED_MODES = tuple(m for m in catalog.MODES if m != "no-grad-forward")

WARMUP_MS = 25.0
REPETITION_MS = 100.0
MIN_REPETITIONS = 10
MAX_REPETITIONS = 400
INTERLEAVE_ROUNDS = 6
# GPU spin before each start event: SPIN_HOST_FACTOR x the host's median enqueue time of one pass, plus a pad,
# at most SPIN_MAX_S; converted to cycles at the card's maximum SM clock (``device.max_sm_clock_hz``).
SPIN_HOST_FACTOR = 2.0
SPIN_PAD_S = 100e-6
SPIN_MAX_S = 0.02
L2_FLUSH_BYTES = 256 * 1024 * 1024
QUANTILES = (0.2, 0.5, 0.8)
MEMORY_REPETITIONS = 3
CORRECTNESS_SEEDS = (11, 12, 13)

# ||out - ref|| / ||ref|| against a float64 (float32 for GEMM-heavy MLPs, TF32 off) reference computed
# from the same low-precision inputs.
TOLERANCES = {
    "bf16": {"outputs": 1e-2, "gradients": 2e-2},
    "fp16": {"outputs": 2e-3, "gradients": 4e-3},
    "fp32": {"outputs": 1e-4, "gradients": 2e-4},
}

# The source's harness, as Liger-Kernel's benchmark scripts call it (benchmark/scripts/utils.py): one
# triton.testing.do_bench per (provider, mode), at do_bench's default budgets, quantiles [0.5, 0.2, 0.8].
REPLICA_WARMUP_MS = 25
REPLICA_REPETITION_MS = 100
REPLICA_QUANTILES = (0.5, 0.2, 0.8)

# Headroom over a workload's input bytes for what a session keeps resident besides them: outputs,
# gradients, the reference's upcast copies, autograd's saved tensors and the L2 flush buffer.
RESIDENT_FACTOR = 8

STATUSES = ("passed", "failed", "unavailable", "too_large", "timeout")

MODE_TITLES = {
    "forward": "forward pass alone (autograd graph built, as in training)",
    "backward": "backward pass alone: torch.autograd.backward(outputs, grads, retain_graph=True) on one forward's graph",
    "full": "forward then backward, per iteration",
}


# The backward mode of a family whose backward overwrites what its forward saved (``BACKWARD_CONSUMES_GRAPH``).
FRESH_GRAPH_BACKWARD_TITLE = ("backward pass alone, each repetition on a fresh forward's graph, that forward run "
                              "untimed before the L2 flush (the family's backward overwrites what its forward saved)")
REPLICA_FRESH_GRAPH_BACKWARD = ("do_bench(lambda: backward(forward(), dy), grad_to_none=leaves): forward and "
                                "backward together, as the source's script times this family's backward rows (its "
                                "own loop of 50 calls, median of 5, rather than do_bench)")


# Correctness as the field judges it: a provider passes where each error against the higher-precision reference
# is within the protocol's fixed tolerance, or within a multiple of the eager baseline's own error in the same
# dtype (torch._dynamo.utils.same: 2x for fp32, 3x for bf16 and fp16; FlashAttention's tests: 2x the max
# error), or within the kernel's own upstream test tolerance (KernelSpec.test_tolerances), whichever is
# loosest. The eager baseline is the family's first of EAGER_BASELINES that the target measures; its own error
# sets the level of its dtype where it is within BASELINE_CEILING x the fixed tolerance (beyond that it computes
# another quantity than the reference, and fails).
FIELD_MULTIPLES = {"fp32": 2.0, "bf16": 3.0, "fp16": 3.0}
BASELINE_CEILING = 10.0
EAGER_BASELINES = ("torch", "huggingface")
FIELD_RULE = "field"


FIELD_RULE_DOCUMENT = {
    "rule": "each error within the fixed tolerance, or within fieldMultiples x the eager baseline's own error in "
            "the same dtype (the first of eagerBaselines the workload measures), whichever is looser",
    "fieldMultiples": FIELD_MULTIPLES,
    "eagerBaselines": list(EAGER_BASELINES),
}


def eager_baseline(providers) -> str | None:
    return next((p for p in EAGER_BASELINES if p in providers), None)


def field_failures(correctness: dict, baseline: dict | None, dtype: str, upstream: float | None = None,
                   is_baseline: bool = False) -> list[str]:
    """Each output and gradient of a provider's correctness record (``outputs``/``gradients``: {name:
    {rel_error, tolerance}}) beyond every bound, with its error and the bounds; [] where it passes.
    ``baseline``: the eager baseline's record in the same check, or None (the fixed tolerance alone);
    ``upstream``: the kernel's own test tolerance in ``dtype``; ``is_baseline``: the record is the baseline's."""
    multiple = FIELD_MULTIPLES.get(dtype, FIELD_MULTIPLES["fp32"])
    out = []
    for kind in ("outputs", "gradients"):
        for name, value in (correctness.get(kind) or {}).items():
            err, tol = value["rel_error"], value["tolerance"]
            base = (((baseline or {}).get(kind) or {}).get(name) or {}).get("rel_error")
            usable = base is not None and math.isfinite(base) and base <= BASELINE_CEILING * tol
            bounds = [(tol, f"the protocol's {tol:.3g}")]
            if is_baseline:
                bounds.append((BASELINE_CEILING * tol, f"{BASELINE_CEILING:g}x that for the eager baseline"))
            elif usable:
                bounds.append((multiple * base, f"{multiple:g}x the eager baseline's {base:.3g}"))
            if upstream:
                bounds.append((upstream, f"the kernel's own test tolerance {upstream:.3g}"))
            if not any(err <= bound for bound, _ in bounds):
                out.append(f"{kind[:-1]} {name}: rel_error {err:.3g} beyond {', '.join(text for _, text in bounds)}")
    return out


def tolerance(dtype: str, kind: str) -> float:
    return TOLERANCES.get(dtype, TOLERANCES["fp32"])[kind]


def protocol_document(mode: str, backward_consumes_graph: bool = False) -> dict:
    fresh_graph = mode == "backward" and backward_consumes_graph
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkProtocol",
        "metadata": {
            "name": f"kernelindex-rerun-{mode}" + ("-fresh-graph" if fresh_graph else ""),
            "title": f"KernelIndex rerun, {FRESH_GRAPH_BACKWARD_TITLE if fresh_graph else MODE_TITLES[mode]}",
        },
        "spec": {
            "harness": {
                # The name every evidence record has published since the first; the command still runs.
                "name": "kernelindex_pipeline.gpu.bench",
                "mode": mode,
                "gradientsReset": "every .grad set to None before each repetition (as triton do_bench grad_to_none)",
                "inputs": "seeded torch.randn (float32 drawn, cast to the workload dtype); weights scaled 1/sqrt(fan_in)",
                "upstreamSemantics": "Liger-Kernel benchmark scripts: forward / backward (retain_graph) / full",
            },
            "measurement": {
                "timer": "cuda_events",
                "primaryStatistic": "median",
                "quantiles": list(QUANTILES),
                "warmupMs": WARMUP_MS,
                "repetitionMs": REPETITION_MS,
                "minRepetitions": MIN_REPETITIONS,
                "maxRepetitions": MAX_REPETITIONS,
                "l2Flush": True,
                "l2FlushBytes": L2_FLUSH_BYTES,
                "launchOverhead": "hidden",
                "launchOverheadMethod": (
                    f"torch.cuda._sleep spin queued after the flush and before each start event, "
                    f"{SPIN_HOST_FACTOR:g}x the host's median enqueue time of one pass + {SPIN_PAD_S * 1e6:g} us "
                    f"(nvbench-style blocking): the interval is device execution time"),
                "latencyUnit": "ns",
                "memory": {
                    "statistic": "torch.cuda.max_memory_allocated after reset_peak_memory_stats, inputs resident",
                    "repetitions": MEMORY_REPETITIONS,
                    "unit": "bytes",
                },
            },
            "correctness": {
                "when": "before timing, on fresh inputs per seed; a failure records status failed and no timing",
                "seeds": list(CORRECTNESS_SEEDS),
                "metric": "relative L2 error ||out - ref|| / ||ref||, max over seeds; NaN fails",
                "reference": "float64 (float32 with TF32 off for GEMM-heavy MLPs) on the same inputs",
                "tolerances": TOLERANCES,
                **FIELD_RULE_DOCUMENT,
            },
            "comparability": {
                "family": RERUN_FAMILY,
                "notes": (
                    "All providers of one workload are measured side by side in one process on one card. "
                    "Latency is device execution time with host launch overhead hidden. Upstream Liger-Kernel "
                    "numbers come from triton.testing.do_bench, which counts host overhead whenever it outlasts "
                    "the L2 flush (most small workloads, e.g. RoPE at seq 2048): compare small-workload medians "
                    "across families with care; large GEMM-bound workloads are comparable."
                ),
            },
        },
    }


REPLICA_MODE_CALLS = {
    "forward": "do_bench(forward, grad_to_none=leaves)",
    "backward": "y = forward(); do_bench(lambda: backward(y, dy, retain_graph=True), grad_to_none=leaves)",
    "full": "do_bench(lambda: backward(forward(), randn_like(y), retain_graph=True), grad_to_none=leaves)",
}


def replica_protocol_document(mode: str, backward_consumes_graph: bool = False) -> dict:
    """The source's own harness, replicated: what Liger-Kernel's published numbers measure."""
    fresh_graph = mode == "backward" and backward_consumes_graph
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkProtocol",
        "metadata": {
            "name": f"liger-do-bench-replica-{mode}" + ("-fresh-graph" if fresh_graph else ""),
            "title": "Liger-Kernel benchmark harness (triton do_bench), replicated: "
                     + (MODE_TITLES["full"] + ", as the source's backward rows of this family" if fresh_graph
                        else MODE_TITLES[mode]),
        },
        "spec": {
            "harness": {
                "name": "kernelindex_pipeline.gpu.rerun (source-replica)",
                "replicates": "Liger-Kernel benchmark/scripts/utils.py run_speed_benchmark / run_benchmarks",
                "mode": mode,
                "call": REPLICA_FRESH_GRAPH_BACKWARD if fresh_graph else REPLICA_MODE_CALLS[mode],
                "gradientsReset": "do_bench grad_to_none: every gradient leaf's .grad set to None before each repetition",
                "upstreamGradients": ("backward: one seeded gradient per output, drawn once; full: torch.randn_like "
                                      "of each output drawn inside every repetition, as the source's full()"),
                "inputs": "the same seeded inputs as the kernelindex_rerun protocol",
            },
            "measurement": {
                "timer": "triton.testing.do_bench (CUDA events around each call, L2 cache zeroed before each)",
                "primaryStatistic": "median",
                "quantiles": list(REPLICA_QUANTILES),
                "warmupMs": REPLICA_WARMUP_MS,
                "repetitionMs": REPLICA_REPETITION_MS,
                "repetitions": "do_bench's own: rep / (estimate of 5 calls), at least 1; warm-up likewise",
                "samples": "do_bench return_mode='all': every repetition's time, ms converted to integer ns",
                "l2Flush": True,
                "launchOverhead": "included",
                "launchOverheadMethod": ("none: no spin before the start event, so whenever the host enqueues a "
                                         "pass more slowly than the GPU runs it the interval is host time"),
                "latencyUnit": "ns",
                "metrics": ["latency"],
            },
            "correctness": {
                "when": "the session's one check, before either protocol times anything; a failure records "
                        "status failed under both protocols and no timing",
                "seeds": list(CORRECTNESS_SEEDS),
                "tolerances": TOLERANCES,
                **FIELD_RULE_DOCUMENT,
            },
            "comparability": {
                "family": SOURCE_REPLICA_FAMILY,
                "notes": (
                    "The source's numbers and these are timed by the same harness on the same pass; they differ in "
                    "the card, its software and the session. Host overhead is part of every repetition, as in the "
                    "source, so small workloads measure the host as much as the kernel."
                ),
            },
        },
    }
