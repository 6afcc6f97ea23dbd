"""CUDA-event timing with an L2 flush between repetitions, and peak-memory measurement."""

from __future__ import annotations

import gc
import statistics
import time

import torch

from kernelindex_pipeline.gpu import protocol as P
from kernelindex_pipeline.gpu.device import max_sm_clock_hz


def l2_flush_buffer() -> torch.Tensor:
    """The buffer zeroed before every timed repetition, larger than the L2 cache."""
    return torch.empty(P.L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")


def latency_stats(times_ms, quantiles=P.QUANTILES) -> dict:
    """Median, p20 and p80 in ns of per-repetition times in ms, with the repetitions themselves as ``samples``."""
    t = torch.tensor(sorted(times_ms), dtype=torch.float64)
    q = dict(zip(quantiles, torch.quantile(t, torch.tensor(quantiles, dtype=torch.float64)).tolist()))
    return {"median": int(round(q[0.5] * 1e6)), "p20": int(round(q[0.2] * 1e6)), "p80": int(round(q[0.8] * 1e6)),
            "repetitions": len(times_ms), "samples": [int(round(v * 1e6)) for v in times_ms]}


def do_bench_replica(fn, leaves) -> dict:
    """One pass timed as the source's benchmark scripts time it: ``triton.testing.do_bench`` at its default
    warm-up and repetition budgets, ``grad_to_none`` the gradient leaves, every repetition kept."""
    import triton.testing

    times = triton.testing.do_bench(fn, warmup=P.REPLICA_WARMUP_MS, rep=P.REPLICA_REPETITION_MS,
                                    grad_to_none=list(leaves) or None, return_mode="all")
    return latency_stats(list(times), P.REPLICA_QUANTILES)


class Timed:
    """One pass under the protocol's timer: triton do_bench's method (CUDA events, L2 flushed before each
    repetition, grads reset before each repetition), plus a GPU spin queued before each start event,
    sized to outlast the host's enqueueing of the pass, so that the interval is device execution time.
    ``calibrate`` picks warm-up and repetition counts from the budgets; ``run(k)`` adds k repetitions.

    With ``setup``, each repetition runs ``setup()`` first, untimed (queued before the flush), and times
    ``fn(state)`` on what it returned: a backward pass on a fresh forward's graph, say."""

    def __init__(self, fn, leaves, flush, setup=None):
        self.fn, self.leaves, self.flush, self.setup = fn, list(leaves), flush, setup
        self.times: list[float] = []

    def _prepared(self):
        """The pass to time next, as a call of no arguments, its setup run."""
        if self.setup is None:
            return self.fn
        state = self.setup()
        return lambda: self.fn(state)

    def _clear(self):
        for leaf in self.leaves:
            leaf.grad = None

    def calibrate(self, warmup_ms=P.WARMUP_MS, rep_ms=P.REPETITION_MS, min_reps=P.MIN_REPETITIONS,
                  max_reps=P.MAX_REPETITIONS):
        self._prepared()()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):  # with a setup, its forward counts too: the budgets are of the card's time
            self._clear()
            fn = self._prepared()
            self.flush.zero_()
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate = max(start.elapsed_time(end) / 3, 1e-4)
        self.n_warmup = max(1, int(warmup_ms / estimate))
        self.n_rep = max(min_reps, min(max_reps, int(rep_ms / estimate)))
        for _ in range(self.n_warmup):
            self._clear()
            self._prepared()()
        torch.cuda.synchronize()
        host = []
        for _ in range(5):
            self._clear()
            fn = self._prepared()
            t0 = time.perf_counter()
            fn()
            host.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
        self.host_s = sorted(host)[len(host) // 2]
        spin_s = min(P.SPIN_MAX_S, P.SPIN_HOST_FACTOR * self.host_s + P.SPIN_PAD_S)
        self.spin_cycles = int(max_sm_clock_hz() * spin_s)
        return self

    def run(self, k: int):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        for i in range(k):
            self._clear()
            fn = self._prepared()
            self.flush.zero_()
            torch.cuda._sleep(self.spin_cycles)
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        self.times.extend(s.elapsed_time(e) for s, e in zip(starts, ends))
        self._clear()

    def stats(self) -> dict:
        return latency_stats(self.times) | {"warmups": self.n_warmup, "host_enqueue_ns": int(self.host_s * 1e9)}


def time_interleaved(passes: dict, flush: torch.Tensor, rounds: int = P.INTERLEAVE_ROUNDS) -> dict:
    """Time several providers' passes side by side: each is calibrated on its own, then their repetitions
    run in ``rounds`` chunks, the provider order rotating every round, so that drift in the card's clocks
    or temperature spreads over all of them. ``passes``: {name: (fn, leaves, setup)} -> {name: stats}, setup
    None or as ``Timed`` takes it."""
    timers = {name: Timed(fn, leaves, flush, setup).calibrate() for name, (fn, leaves, setup) in passes.items()}
    names = list(timers)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order.reverse()
        for name in order:
            t = timers[name]
            t.run(max(1, -(-t.n_rep // rounds)))
    return {name: t.stats() for name, t in timers.items()}


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
