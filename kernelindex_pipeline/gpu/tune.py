"""Launch-setting sweep for KernelIndex's kernels on the GPU at hand: ``python -m kernelindex_pipeline.gpu.tune``.

Times candidate settings of the norm kernels (``kernels.engines.norm.settings`` records) and of the
gated-MLP assembly (``kernels.engines.gated_mlp.settings.MlpAssembly``) on the rerun targets' shapes,
beside Liger-Kernel, with the protocol's timer (CUDA events after an L2 flush and a GPU spin). Every
candidate's results are first checked against the committed setting's. Prints one line per candidate and
the fastest per (kernel, shape, pass); ``--out`` also writes them as JSON. Nothing is changed in the
repository: a winner is copied into the settings tables by hand, with the evidence file of the rerun
that confirms it, and logged in docs/kernel-decisions.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
import time

import torch

from kernels.adapter import Unavailable, load_adapter
from kernels.tensors import RERUN_DTYPES, as_tuple, grad_outputs, leaf_copies
from kernels.engines.gated_mlp import gated_mlp
from kernels.engines.gated_mlp.settings import MLP_ASSEMBLY
from kernels.engines.norm import norm_backward, norm_forward
from kernels.engines.norm.settings import (
    BackwardSetting,
    ForwardSetting,
    OneRow,
    RowChunks,
    RowTiles,
    SlicedRows,
    WholeRow,
)
from kernelindex_pipeline.gpu.harness import l2_flush_buffer, prepare_pass, release_memory
from kernelindex_pipeline.gpu.device import NO_CUDA_MESSAGE, cuda_available
from kernelindex_pipeline.gpu.timing import Timed, time_interleaved

NORM_SHAPES = [  # (kernel, is_ln, rows, hidden, dtype): the rerun targets' norm workloads
    ("rms_norm", False, 2048, 1024, "bf16"), ("rms_norm", False, 2048, 4096, "bf16"),
    ("rms_norm", False, 2048, 16384, "bf16"),
    ("layer_norm", True, 4096, 1024, "fp32"), ("layer_norm", True, 4096, 4096, "fp32"),
    ("layer_norm", True, 4096, 16384, "fp32"),
]
MLP_SHAPES = [
    ("geglu", {"batch": 8, "seq": 8192, "hidden": 4096, "intermediate": 11008}),
    ("swiglu", {"batch": 4, "seq": 8192, "hidden": 4096, "intermediate": 11008}),
]


def register_caps(num_warps: int, register_file: int = 65536, cap_max: int = 255) -> list[int]:
    """Registers per thread at which 2, 3 or 4 programs of ``num_warps`` warps fit in an SM's register file
    (rounded down to a multiple of 8, as ptxas allocates), where at least 32 are left."""
    caps = [min(cap_max, register_file // (k * num_warps * 32)) // 8 * 8 for k in (2, 3, 4)]
    return [c for c in dict.fromkeys(caps) if c >= 32]


def forward_candidates(hidden: int) -> list[ForwardSetting]:
    """Tiles of one or several rows and the 1-D one-row kernel, with and without streaming cache hints;
    the 1-D kernel with the parameters loaded after the statistics under register caps that fit two or
    more programs on an SM; rows of two chunks or more, also one row in two sweeps of 1024-4096-column
    chunks."""
    warps = [4, 8, 16] if hidden >= 4096 else [2, 4, 8]
    rows = [1, 2, 4] if hidden <= 1024 else [1]
    tiles = [RowTiles(rows_per_program=r, warps=w, stream=st) for r, w, st in itertools.product(rows, warps, [False, True])]
    one_row = [OneRow(warps=w, stream=st) for w, st in itertools.product(warps, [False, True])]
    late = [OneRow(warps=w, late_params=True, max_regs=cap) for w in warps for cap in (None, *register_caps(w))]
    chunks = [c for c in (1024, 2048, 4096) if c <= hidden // 2]
    return tiles + one_row + late + [RowChunks(chunk=c, warps=w) for c, w in itertools.product(chunks, [2, 4, 8])]


def backward_candidates(hidden: int, dtype: str = "bf16") -> list[BackwardSetting]:
    """Whole rows (prefetched in registers or pipelined), for wide rows rows split in column slices over
    two programs (plain loads or TMA tiles, the other slice's w held or not), narrower rows as whole-row
    TMA tiles; each again at one program per SM with the partial sums fused behind a grid barrier.
    Shared memory bounds the pipelines: whole wide rows have no room for a pipelined loop (fp32) and
    spill with both rows prefetched, three fp32 sliced stages do not fit, nor do more TMA programs than
    one per SM at 16384 columns (docs/kernel-decisions.md)."""
    wide = hidden >= 16384
    per_sm = [1, 2] if wide else ([1, 2, 4] if hidden >= 4096 else [2, 4, 8])
    warps = [16, 32] if wide else ([8, 16] if hidden >= 4096 else [4, 8])
    in_memory = [False, True] if wide else [False]
    loads = [("none", 1), ("x", 1)] if wide else [("x_dy", 1), ("x", 1), ("none", 2), ("none", 3)]
    # Wide rows: two programs per SM only fit with the partial sums out of registers.
    whole = [WholeRow(programs_per_sm=p, warps=w, partials_in_memory=g, reload_w=r, prefetch=pf, stages=s)
             for p, w, g, r, (pf, s) in itertools.product(per_sm, warps, in_memory, [False, True], loads)
             if not (wide and p > 1 and not g)]
    sliced: list[BackwardSetting] = []
    if wide:
        stages = [1, 2, 3] if dtype == "bf16" else [1]
        sliced += [SlicedRows(programs_per_sm=p, warps=w, slices=2, reload_w=r, stages=st)
                   for p, w, r, st in itertools.product([1, 2], [8, 16, 32], [False, True], stages)]
        tma_stages = [2, 3] if dtype == "bf16" else [1, 2]
        sliced += [SlicedRows(programs_per_sm=1, warps=w, slices=2, reload_w=r, stages=st, tma=True)
                   for w, r, st in itertools.product([8, 16], [False, True], tma_stages)]
        held_stages = [3, 4] if dtype == "bf16" else [2]
        sliced += [SlicedRows(programs_per_sm=1, warps=w, slices=2, stages=st, tma=t, hold_other_w=True)
                   for w, st, t in itertools.product([8, 16], held_stages, [False, True])]
    else:
        sliced += [SlicedRows(programs_per_sm=p, warps=w, slices=1, stages=st, tma=True)
                   for p, w, st in itertools.product([1, 2], [4, 8] if hidden >= 4096 else [2, 4], [3, 4, 6, 8])]
    fused = [dataclasses.replace(c, programs_per_sm=1, fused_sum=True) for c in whole + sliced]
    return whole + sliced + list(dict.fromkeys(fused))


def _time_us(fn, flush) -> float:
    t = Timed(fn, (), flush).calibrate(warmup_ms=5, rep_ms=40, min_reps=10, max_reps=200)
    t.run(t.n_rep)
    return t.stats()["median"] / 1e3


def _bring_clocks_up(flush, seconds: float = 0.5) -> None:
    """Keep the card busy before the first timing: from idle clocks the first candidates measure slow."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        flush.zero_()
        torch.cuda.synchronize()


def _run_once(fn, flush) -> float:
    """compile_only's stand-in for ``_time_us``: one untimed call (compiles what it launches)."""
    fn()
    return 0.0


def _close(got, want, dtype) -> bool:
    tol = 2e-2 if dtype == "bf16" else 1e-4
    return all(torch.allclose(g.float(), w.float(), rtol=tol, atol=tol) for g, w in zip(got, want) if w is not None)


def _describe(candidate) -> str:
    """"committed", "liger" or an assembly's name as they are; a setting record as its repr."""
    return candidate if isinstance(candidate, str) else repr(candidate)


def sweep_norms(log, backward: bool = True, shapes: list[int] | None = None, compile_only: bool = False,
                part: tuple[int, int] = (0, 1)) -> list[dict]:
    """``shapes``: indexes into NORM_SHAPES (all by default). ``part`` (k, n): only every n-th candidate from the
    k-th (to split compile-only work over processes). ``compile_only``: run each candidate once, untimed,
    to fill Triton's on-disk cache (several such processes compile in parallel before one timed sweep)."""
    flush = l2_flush_buffer()
    rows_out = []
    time_us = _run_once if compile_only else _time_us
    if not compile_only:
        _bring_clocks_up(flush)
    for i, (kernel, is_ln, rows, hidden, dtype) in enumerate(NORM_SHAPES):
        if shapes is not None and i not in shapes:
            continue
        gen = torch.Generator(device="cuda").manual_seed(1)
        td = RERUN_DTYPES[dtype]
        x = torch.randn(rows, hidden, device="cuda", generator=gen).to(td)
        w = (torch.randn(hidden, device="cuda", generator=gen) * 0.1 + 1).to(td)
        b = (torch.randn(hidden, device="cuda", generator=gen) * 0.1).to(td)
        dy = torch.randn(rows, hidden, device="cuda", generator=gen).to(td)
        shape = f"{kernel} {rows}x{hidden} {dtype}"

        def emit(kind, cand, us, ok=True):
            rows_out.append({"shape": shape, "pass": kind, "candidate": cand, "us": round(us, 2), "ok": ok})
            log(f"{shape:<28} {kind:<9} {_describe(cand):<70} {us:9.2f} us{'' if ok else '  WRONG'}")

        try:
            liger = load_adapter(kernel).build("liger", {"x": x, "weight": w, "bias": b}, {"eps": 1e-6})
        except Unavailable:
            liger = None
        if liger is not None:
            emit("forward", "liger", time_us(liger.fn, flush))
            outs = liger.fn()
            dy_liger = dy.clone()  # Liger's RMSNorm writes dx into dy's storage: repeated passes would corrupt dy
            emit("backward", "liger",
                 time_us(lambda: torch.autograd.backward(outs, [dy_liger], retain_graph=True), flush))
            del outs
        want = norm_forward(x, w, b, 1e-6, is_ln)
        emit("forward", "committed", time_us(lambda: norm_forward(x, w, b, 1e-6, is_ln), flush))
        for cand in forward_candidates(hidden)[part[0]::part[1]]:
            got = norm_forward(x, w, b, 1e-6, is_ln, setting=cand)
            emit("forward", cand, time_us(lambda c=cand: norm_forward(x, w, b, 1e-6, is_ln, setting=c), flush),
                 _close(got, want, dtype))
        _, mean, rstd = want
        want_b = norm_backward(dy, x, w, mean, rstd, is_ln)
        emit("backward", "committed", time_us(lambda: norm_backward(dy, x, w, mean, rstd, is_ln), flush))
        for cand in backward_candidates(hidden, dtype)[part[0]::part[1]] if backward else []:
            try:
                got = norm_backward(dy, x, w, mean, rstd, is_ln, setting=cand)
            except Exception as exc:  # noqa: BLE001 - a setting that does not compile is skipped
                log(f"{shape:<28} backward  {cand!r} failed: {str(exc).splitlines()[0][:120]}")
                continue
            emit("backward", cand, time_us(lambda c=cand: norm_backward(dy, x, w, mean, rstd, is_ln, setting=c),
                                         flush), _close(got, want_b, dtype))
        torch.cuda.empty_cache()
    return rows_out


def _mlp_pass(impl, inputs: dict, assembly, seed: int = 0) -> tuple:
    """(fn, dys, leaves) of KernelIndex's gated MLP under ``assembly``."""
    lv = leaf_copies(inputs, impl.GRAD_INPUTS)

    def fn():
        return (gated_mlp(lv["x"], lv["w_gate"], lv["w_up"], lv["w_down"], impl.ACTIVATION, assembly),)

    dys = grad_outputs(as_tuple(fn()), seed)
    for leaf in lv.values():
        leaf.grad = None
    return fn, dys, list(lv.values())


def sweep_mlps(log) -> list[dict]:
    """Each assembly of the gated MLP (gate/up fused or not, cuBLAS or cuBLASLt) beside Liger, repetitions
    interleaved as in the rerun; the library is set in each direction by the assembly itself."""
    flush = l2_flush_buffer()
    assemblies = {f"fuse_min_tokens={f}, blas={b}": dataclasses.replace(MLP_ASSEMBLY, fuse_min_tokens=f, blas=b)
                  for f in (0, 2**62) for b in (None, "cublaslt")}
    rows_out = []
    for kernel, params in MLP_SHAPES:
        impl = load_adapter(kernel)
        target = {"kernel": kernel, "params": params, "dtype": "bf16"}
        inputs = impl.make_inputs(params, "bf16", 0, "cuda")
        liger = prepare_pass(impl, target, "liger")
        states = {"liger": (liger["built"].fn, liger["dys"], liger["leaves"])}
        states.update({name: _mlp_pass(impl, inputs, a) for name, a in assemblies.items()})
        for mode in ("forward", "backward"):
            passes, keep = {}, []
            for name, (fn, dys, leaves) in states.items():
                if mode == "backward":
                    outs = as_tuple(fn())
                    keep.append(outs)

                    def fn(outs=outs, dys=dys):
                        torch.autograd.backward(outs, dys, retain_graph=True)
                passes[name] = (fn, leaves, None)
            for name, stats in time_interleaved(passes, flush).items():
                us = stats["median"] / 1e3
                rows_out.append({"shape": f"{kernel} {params}", "pass": mode, "candidate": name, "us": us, "ok": True})
                log(f"{kernel:<8} {mode:<9} {name:<48} {us / 1e3:9.3f} ms")
            del passes, keep
            release_memory()
        del states, liger, inputs
        release_memory()
    return rows_out


def sweep_gemms(log) -> list[dict]:
    """The geglu seed's GEMMs in each operand layout, through cuBLAS and cuBLASLt, beside the square
    8192^3 product the matmul ceiling is measured on; repetitions interleaved, TFLOP/s per variant."""
    flush = l2_flush_buffer()
    p = MLP_SHAPES[0][1]
    n, h, i = p["batch"] * p["seq"], p["hidden"], p["intermediate"]

    def rand(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)

    x, w_gu, w_down, hh, dy, sq = rand(n, h), rand(2 * i, h), rand(h, i), rand(n, i), rand(n, h), rand(8192, 8192)
    gemms = {  # name: (fn, flops)
        "square 8192^3": (lambda: sq @ sq, 2 * 8192**3),
        "gate/up x @ Wgu^T": (lambda: x @ w_gu.t(), 2 * n * h * 2 * i),
        "gate/up (Wgu @ x^T)^T": (lambda: w_gu @ x.t(), 2 * n * h * 2 * i),
        "down h @ Wd^T": (lambda: hh @ w_down.t(), 2 * n * i * h),
        "down (Wd @ h^T)^T": (lambda: w_down @ hh.t(), 2 * n * i * h),
        "dh dy @ Wd": (lambda: dy @ w_down, 2 * n * h * i),
        "dW_down dy^T @ h": (lambda: dy.t() @ hh, 2 * n * h * i),
    }
    rows_out = []
    for lib in ("cublas", "cublaslt"):
        torch.backends.cuda.preferred_blas_library(lib)
        stats = time_interleaved({name: (fn, (), None) for name, (fn, _) in gemms.items()}, flush)
        for name, st in stats.items():
            tflops = gemms[name][1] / (st["median"] * 1e-9) / 1e12
            rows_out.append({"shape": name, "pass": "gemm", "candidate": lib, "us": st["median"] / 1e3, "ok": True})
            log(f"{lib:<9} {name:<24} {st['median'] / 1e6:8.3f} ms {tflops:7.1f} TFLOP/s")
    torch.backends.cuda.preferred_blas_library("default")
    return rows_out


def best(rows: list[dict]) -> list[str]:
    """The fastest correct candidate per (shape, pass), beside the committed setting and Liger."""
    lines, groups = [], {}
    for r in rows:
        if r["ok"] and r["candidate"] != "liger":
            groups.setdefault((r["shape"], r["pass"]), []).append(r)
    liger = {(r["shape"], r["pass"]): r["us"] for r in rows if r["candidate"] == "liger"}
    for key, rs in groups.items():
        top = min(rs, key=lambda r: r["us"])
        com = next((r["us"] for r in rs if r["candidate"] == "committed"), None)
        lines.append(f"BEST {key[0]:<28} {key[1]:<9} {_describe(top['candidate']):<70} {top['us']:9.2f} us"
                     f" (committed {com}, liger {liger.get(key)})")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["norms", "mlps", "gemms"], default=None)
    ap.add_argument("--no-backward", action="store_true", help="norms: forward settings only")
    ap.add_argument("--shapes", type=int, nargs="*", default=None, help="norms: NORM_SHAPES indexes")
    ap.add_argument("--compile-only", action="store_true", help="norms: compile every candidate, time nothing")
    ap.add_argument("--part", default="0/1", help="norms: K/N, every N-th candidate from the K-th")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    if not cuda_available():
        print(NO_CUDA_MESSAGE, file=sys.stderr)
        return 2
    rows = []
    if args.only in (None, "norms"):
        rows += sweep_norms(lambda m: print(m, flush=True), backward=not args.no_backward, shapes=args.shapes,
                            compile_only=args.compile_only, part=tuple(map(int, args.part.split("/"))))
    if args.only in (None, "mlps"):
        rows += sweep_mlps(lambda m: print(m, flush=True))
    if args.only == "gemms":
        rows += sweep_gemms(lambda m: print(m, flush=True))
    for line in best(rows):
        print(line)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump([dict(r, candidate=_describe(r["candidate"])) for r in rows], fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
