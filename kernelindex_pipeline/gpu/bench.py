"""Rerun entry point: ``python -m kernelindex_pipeline.gpu.bench --out data/evidence/h200-<date>.jsonl.gz``.

For each target (kernel, params, dtype, providers, modes) it checks every provider's correctness on
fresh seeded inputs, then - for providers that passed - measures peak memory and latency in each mode,
all providers side by side in this one process, and writes one evidence record per
(provider, mode, metric) as gzipped JSONL.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import gzip
import importlib
import json
import math
import sys
import time
from pathlib import Path

NO_CUDA_MESSAGE = "kernelindex rerun: no CUDA device available here; nothing was measured and nothing was written"


class NoCudaDevice(RuntimeError):
    pass


def cuda_available() -> bool:
    try:
        import torch
    except Exception:  # noqa: BLE001
        return False
    return bool(torch.cuda.is_available())


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clean(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def achieved(nbytes: int, nflops: int, median_ns: int | None, env: dict) -> dict:
    if not median_ns:
        return {"bandwidth_tbps": None, "tflops": None, "fraction_of_copy_bandwidth": None,
                "fraction_of_matmul_rate": None}
    ceil = env["spec"]["ceilings"]
    bw = nbytes / median_ns / 1e3
    tf = nflops / median_ns / 1e3
    return {"bandwidth_tbps": _sig(bw), "tflops": _sig(tf), "fraction_of_copy_bandwidth": _sig(bw / ceil["copyTBps"]),
            "fraction_of_matmul_rate": _sig(tf / ceil["bf16MatmulTFLOPs"])}


def load_impl(kernel: str):
    return importlib.import_module(f"kernels.{kernel}.impl")


def _record(target, impl, provider, label, mode, metric, stats, correctness, env, observed_at):
    from kernelindex_pipeline.gpu import protocol as P

    params, dtype = target["params"], target["dtype"]
    nbytes = int(impl.bytes_moved(params, dtype, mode))
    nflops = int(impl.flops(params, mode))
    corr = {k: correctness[k] for k in ("seeds", "outputs", "gradients") if k in correctness}
    if correctness.get("status") == "failed":
        corr["reason"] = correctness.get("reason", "failed")
    latency = metric == "latency"
    return _clean({
        "kernel": target["kernel"],
        "provider": provider,
        "implementation_label": label,
        "mode": mode,
        "metric": metric,
        "unit": "ns" if latency else "bytes",
        "median": stats.get("median") if stats else None,
        "p20": stats.get("p20") if stats else None,
        "p80": stats.get("p80") if stats else None,
        "status": correctness.get("status", "failed"),
        "correctness": corr,
        "params": dict(params),
        "dtype": dtype,
        "implied": dict(getattr(impl, "IMPLIED", {})),
        "bytes": nbytes,
        "flops": nflops,
        "achieved": achieved(nbytes, nflops, stats.get("median") if (stats and latency) else None, env),
        "observed_at": observed_at,
        "protocol": P.protocol_document(mode),
        "environment": env,
    })


def _prepare(impl, target, provider, seed=0):
    from kernels._impl_common import as_tuple
    from kernelindex_pipeline.gpu.correctness import grad_outputs

    inputs = impl.make_inputs(target["params"], target["dtype"], seed, "cuda")
    built = impl.build(provider, inputs, target["params"])
    dys = grad_outputs(as_tuple(built.fn()), seed)
    for leaf in built.leaves.values():
        leaf.grad = None
    return {"inputs": inputs, "built": built, "dys": dys, "leaves": list(built.leaves.values())}


def _release():
    import torch

    gc.collect()
    torch.cuda.empty_cache()


def measure_memory(impl, target, provider, seed=0) -> dict:
    """{(mode, "peak_memory"): stats} for one provider, alone on the card."""
    import torch

    from kernels._impl_common import as_tuple
    from kernelindex_pipeline.gpu.timing import peak_memory

    st = _prepare(impl, target, provider, seed)
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
    _release()
    return out


def measure_latency(impl, target, providers, seed=0) -> dict:
    """{provider: {(mode, "latency"): stats}}: all providers side by side, repetitions interleaved."""
    import torch

    from kernels._impl_common import as_tuple
    from kernelindex_pipeline.gpu.timing import time_interleaved

    states = {p: _prepare(impl, target, p, seed) for p in providers}
    flush = torch.empty(impl_flush_elems(), dtype=torch.int32, device="cuda")
    out = {p: {} for p in providers}
    for mode in target["modes"]:
        passes, kept = {}, []
        for p, st in states.items():
            built, dys = st["built"], st["dys"]
            if mode == "forward":
                fn = built.fn
            elif mode == "backward":
                outs = as_tuple(built.fn())
                kept.append(outs)

                def fn(outs=outs, dys=dys):
                    torch.autograd.backward(outs, dys, retain_graph=True)
            else:
                def fn(built=built, dys=dys):
                    torch.autograd.backward(as_tuple(built.fn()), dys)
            passes[p] = (fn, st["leaves"])
        for p, stats in time_interleaved(passes, flush).items():
            out[p][(mode, "latency")] = stats
        del passes, kept
        for st in states.values():
            for leaf in st["leaves"]:
                leaf.grad = None
        _release()
    del states, flush
    _release()
    return out


def impl_flush_elems():
    from kernelindex_pipeline.gpu import protocol as P

    return P.L2_FLUSH_BYTES // 4


def run_reruns(targets: list[dict], out_path, env: dict | None = None, log=print) -> list[dict]:
    """Check, measure and record ``targets``; returns the records written to ``out_path`` (gzipped JSONL)."""
    if not cuda_available():
        raise NoCudaDevice(NO_CUDA_MESSAGE)
    import torch

    from kernelindex_pipeline.gpu.correctness import check_correctness
    from kernelindex_pipeline.gpu.environment import capture_environment

    torch.backends.cuda.matmul.allow_tf32 = False
    env = env or capture_environment(targets)
    log(f"environment: {env['metadata']['title']}; ceilings {env['spec']['ceilings']}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    with gzip.open(out_path, "wt", encoding="utf-8") as fh:
        for target in targets:
            t0 = time.time()
            impl = load_impl(target["kernel"])
            try:
                corr = check_correctness(impl, target["providers"], target["params"], target["dtype"], "cuda")
            except Exception as exc:  # noqa: BLE001
                log(f"  {target['kernel']} {target['params']}: correctness check crashed: {exc!r}")
                continue
            metrics = target.get("metrics", ["latency", "peak_memory"])
            passed = [p for p in target["providers"] if corr[p]["status"] == "passed"]
            stats = {p: {} for p in passed}
            observed_at = _now()
            for p in list(passed):
                if "peak_memory" not in metrics:
                    break
                try:
                    stats[p].update(measure_memory(impl, target, p))
                except Exception as exc:  # noqa: BLE001
                    log(f"  {target['kernel']} {p}: memory measurement crashed: {exc!r}")
                    corr[p] = dict(corr[p], status="failed", reason=f"measurement crashed: {exc!r}"[:500])
                    passed.remove(p)
                    _release()
            if "latency" in metrics and passed:
                try:
                    for p, st in measure_latency(impl, target, passed).items():
                        stats[p].update(st)
                        host = {m: s.get("host_enqueue_ns") for (m, _k), s in st.items()}
                        log(f"  {target['kernel']} {p}: host enqueue ns per pass {host}")
                except Exception as exc:  # noqa: BLE001
                    log(f"  {target['kernel']}: latency measurement crashed: {exc!r}")
                    for p in passed:
                        corr[p] = dict(corr[p], status="failed", reason=f"measurement crashed: {exc!r}"[:500])
                    _release()
            for provider in target["providers"]:
                c = corr[provider]
                if c["status"] == "unavailable":
                    log(f"  {target['kernel']} {provider}: unavailable ({c['reason']})")
                    continue
                if c["status"] != "passed":
                    log(f"  {target['kernel']} {provider}: FAILED: {c.get('reason')}")
                for mode in target["modes"]:
                    for metric in metrics:
                        st = stats.get(provider, {}).get((mode, metric)) if c["status"] == "passed" else None
                        rec = _record(target, impl, provider, c.get("label") or provider, mode, metric, st, c, env,
                                      observed_at)
                        records.append(rec)
                        fh.write(json.dumps(rec, sort_keys=True) + "\n")
                fh.flush()
            log(f"  done {target['kernel']} {target['params']} {target['dtype']} in {time.time() - t0:.1f}s")
    return records


def summary_table(records: list[dict]) -> str:
    lines = [f"{'kernel':<12} {'workload':<44} {'mode':<8} {'provider':<12} {'metric':<11} {'median':>12} "
             f"{'TB/s':>7} {'%copy':>6} {'%mm':>6} status"]
    for r in records:
        a = r["achieved"]
        wl = ",".join(f"{k}={v}" for k, v in r["params"].items())
        med = r["median"]
        med_s = "-" if med is None else (f"{med / 1e3:.1f}us" if r["metric"] == "latency" else f"{med / 2**20:.1f}MiB")
        pct = lambda v: "-" if v is None else f"{100 * v:.1f}"  # noqa: E731
        bw = "-" if a["bandwidth_tbps"] is None else f"{a['bandwidth_tbps']:.3f}"
        lines.append(f"{r['kernel']:<12} {wl:<44} {r['mode']:<8} {r['provider']:<12} {r['metric']:<11} {med_s:>12} "
                     f"{bw:>7} {pct(a['fraction_of_copy_bandwidth']):>6} {pct(a['fraction_of_matmul_rate']):>6} "
                     f"{r['status']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelindex_pipeline.gpu.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="evidence file to write (.jsonl.gz)")
    ap.add_argument("--targets", choices=["seeds", "all"], default="seeds")
    ap.add_argument("--kernels", nargs="*", help="only these kernels")
    args = ap.parse_args(argv)
    if not cuda_available():
        print(NO_CUDA_MESSAGE, file=sys.stderr)
        return 2
    from kernelindex_pipeline.gpu.targets import targets_named

    records = run_reruns(targets_named(args.targets, args.kernels), args.out)
    print(summary_table(records))
    print(f"wrote {len(records)} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
