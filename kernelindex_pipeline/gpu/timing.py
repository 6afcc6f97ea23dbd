"""CUDA-event timing with an L2 flush between repetitions, and peak-memory measurement."""

from __future__ import annotations

import gc
import statistics
import time

import torch

from kernelindex_pipeline.gpu import protocol as P


def _quantiles(values_ms):
    vals = sorted(values_ms)
    t = torch.tensor(vals, dtype=torch.float64)
    q = torch.quantile(t, torch.tensor(P.QUANTILES, dtype=torch.float64)).tolist()
    return {"p20": q[0], "median": q[1], "p80": q[2]}


def time_fn(fn, leaves=(), flush: torch.Tensor | None = None, warmup_ms=P.WARMUP_MS, rep_ms=P.REPETITION_MS,
            min_reps=P.MIN_REPETITIONS, max_reps=P.MAX_REPETITIONS) -> dict:
    """Median/p20/p80 in nanoseconds of ``fn``'s device execution on the current CUDA stream.

    triton do_bench's method (CUDA events, L2 flushed before each repetition, grads reset), plus a
    GPU spin queued before each start event, sized to outlast the host's enqueueing of ``fn``, so
    that the interval measures the device, not how fast this host launches kernels."""
    if flush is None:
        flush = torch.empty(P.L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def clear():
        for leaf in leaves:
            leaf.grad = None

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        clear()
        flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 3, 1e-4)
    n_warmup = max(1, int(warmup_ms / estimate))
    n_rep = max(min_reps, min(max_reps, int(rep_ms / estimate)))
    for _ in range(n_warmup):
        clear()
        fn()
    torch.cuda.synchronize()
    host = []
    for _ in range(5):
        clear()
        t0 = time.perf_counter()
        fn()
        host.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    host_s = sorted(host)[len(host) // 2]
    spin_cycles = int(P.SPIN_CLOCK_HZ * min(P.SPIN_MAX_S, P.SPIN_HOST_FACTOR * host_s + P.SPIN_PAD_S))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        clear()
        flush.zero_()
        torch.cuda._sleep(spin_cycles)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    q = _quantiles([s.elapsed_time(e) for s, e in zip(starts, ends)])
    return {k: int(round(v * 1e6)) for k, v in q.items()} | {"repetitions": n_rep, "warmups": n_warmup,
                                                             "host_enqueue_ns": int(host_s * 1e9)}


def peak_memory(fn, setup=None, reps=P.MEMORY_REPETITIONS) -> dict:
    """Peak bytes allocated while ``fn`` runs (inputs and anything ``setup`` returns stay resident)."""
    peaks = []
    for _ in range(reps):
        state = setup() if setup is not None else None
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        fn(state) if setup is not None else fn()
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated())
        del state
    peaks.sort()
    return {"median": int(statistics.median(peaks)), "p20": int(peaks[0]), "p80": int(peaks[-1])}
