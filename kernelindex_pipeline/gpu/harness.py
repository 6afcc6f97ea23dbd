"""Measuring one target's providers on the CUDA device: a pass prepared per provider, its peak memory
alone on the card, the latency of all providers side by side, and the latency as the source's own
harness (triton do_bench) takes it."""

from __future__ import annotations

import gc

import torch

from kernels.adapter import RerunAdapter
from kernels.tensors import as_tuple, grad_outputs
from kernelindex_pipeline.gpu.workloads import tensor_dtype
from kernelindex_pipeline.gpu.timing import do_bench_replica, l2_flush_buffer, peak_memory, time_interleaved


def release_memory() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def prepare_pass(impl: RerunAdapter, target: dict, provider: str, seed: int = 0) -> dict:
    """Inputs, the provider's built pass, seeded upstream gradients and the gradient leaves (cleared)."""
    inputs = impl.make_inputs(target["params"], tensor_dtype(target), seed, "cuda")
    built = impl.build(provider, inputs, target["params"])
    dys = grad_outputs(as_tuple(built.fn()), seed)
    for leaf in built.leaves.values():
        leaf.grad = None
    return {"inputs": inputs, "built": built, "dys": dys, "leaves": list(built.leaves.values())}


def measure_memory(impl: RerunAdapter, target: dict, provider: str, seed: int = 0) -> dict:
    """{(mode, "peak_memory"): stats} for one provider, alone on the card."""
    st = prepare_pass(impl, target, provider, seed)
    built, dys, leaves = st["built"], st["dys"], st["leaves"]

    def clear():
        for leaf in leaves:
            leaf.grad = None

    out = {}
    for mode in target["modes"]:
        clear()
        if mode == "forward":
            out[(mode, "peak_memory")] = peak_memory(lambda: built.fn())
        elif mode == "backward":
            def setup():
                clear()
                return as_tuple(built.fn())
            out[(mode, "peak_memory")] = peak_memory(lambda o: torch.autograd.backward(o, dys), setup=setup)
        else:
            def full_once():
                clear()
                torch.autograd.backward(as_tuple(built.fn()), dys)
            out[(mode, "peak_memory")] = peak_memory(full_once)
    clear()
    del st
    release_memory()
    return out


def measure_latency(impl: RerunAdapter, target: dict, providers: list[str], seed: int = 0) -> dict:
    """{provider: {(mode, "latency"): stats}}: all providers side by side, repetitions interleaved."""
    states = {p: prepare_pass(impl, target, p, seed) for p in providers}
    flush = l2_flush_buffer()
    out = {p: {} for p in providers}
    for mode in target["modes"]:
        passes, kept = {}, []
        for p, st in states.items():
            built, dys = st["built"], st["dys"]
            setup = None
            if mode == "forward":
                fn = built.fn
            elif mode == "backward" and impl.BACKWARD_CONSUMES_GRAPH:
                def setup(built=built):
                    return as_tuple(built.fn())

                def fn(outs, dys=dys):
                    torch.autograd.backward(outs, dys)
            elif mode == "backward":
                outs = as_tuple(built.fn())
                kept.append(outs)

                def fn(outs=outs, dys=dys):
                    torch.autograd.backward(outs, dys, retain_graph=True)
            else:
                def fn(built=built, dys=dys):
                    torch.autograd.backward(as_tuple(built.fn()), dys)
            passes[p] = (fn, st["leaves"], setup)
        for p, stats in time_interleaved(passes, flush).items():
            out[p][(mode, "latency")] = stats
        del passes, kept
        for st in states.values():
            for leaf in st["leaves"]:
                leaf.grad = None
        release_memory()
    del states, flush
    release_memory()
    return out


def measure_replica(impl: RerunAdapter, target: dict, providers: list[str], seed: int = 0) -> dict:
    """{provider: {(mode, "latency"): stats}} under the source-replica protocol: each provider's pass
    timed on its own by ``triton.testing.do_bench``, one provider after another, as the source does."""
    out = {p: {} for p in providers}
    for p in providers:
        st = prepare_pass(impl, target, p, seed)
        built, dys, leaves = st["built"], st["dys"], st["leaves"]
        for mode in target["modes"]:
            if mode == "forward":
                fn = built.fn
            elif mode == "backward" and impl.BACKWARD_CONSUMES_GRAPH:
                def fn(built=built, dys=dys):
                    torch.autograd.backward(as_tuple(built.fn()), dys)
            elif mode == "backward":
                outs = as_tuple(built.fn())

                def fn(outs=outs, dys=dys):
                    torch.autograd.backward(outs, dys, retain_graph=True)
            else:
                def fn(built=built):
                    outs = as_tuple(built.fn())
                    torch.autograd.backward(outs, [torch.randn_like(o) for o in outs], retain_graph=True)
            out[p][(mode, "latency")] = do_bench_replica(fn, leaves)
            del fn
            for leaf in leaves:
                leaf.grad = None
        del st, built, dys, leaves
        release_memory()
    return out
