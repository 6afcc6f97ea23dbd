"""A rerun session: ``python -m kernelindex_pipeline.gpu.rerun --out data/evidence/h200-<date>.jsonl.gz``.

For each target (kernel, params, dtype, providers, modes) it checks every provider's correctness on
fresh seeded inputs, then, for providers that passed, measures peak memory and latency in each mode,
all providers side by side in this one process, and writes one evidence record per
(provider, mode, metric) as gzipped JSONL.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import sys
import time
from pathlib import Path

from kernels._adapter import load_adapter

NO_CUDA_MESSAGE = "kernelindex rerun: no CUDA device available here; nothing was measured and nothing was written"


class NoCudaDevice(RuntimeError):
    pass


def cuda_available() -> bool:
    try:
        import torch
    except Exception:  # noqa: BLE001 - no usable torch means no CUDA
        return False
    return bool(torch.cuda.is_available())


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_reruns(targets: list[dict], out_path, env: dict | None = None, log=print) -> list[dict]:
    """Check, measure and record ``targets``; returns the records written to ``out_path`` (gzipped JSONL).

    Every target's kernel adapter is loaded (and checked against ``kernels._adapter.RerunAdapter``)
    before anything is measured."""
    if not cuda_available():
        raise NoCudaDevice(NO_CUDA_MESSAGE)
    # Imported here, once CUDA is known to be there: without it, this module answers without torch.
    import torch

    from kernelindex_pipeline.gpu.correctness import check_correctness
    from kernelindex_pipeline.gpu.device import max_sm_clock_hz
    from kernelindex_pipeline.gpu.environment import capture_environment
    from kernelindex_pipeline.gpu.harness import measure_latency, measure_memory, release_memory
    from kernelindex_pipeline.gpu.records import evidence_record

    adapters = {kernel: load_adapter(kernel) for kernel in dict.fromkeys(t["kernel"] for t in targets)}
    torch.backends.cuda.matmul.allow_tf32 = False
    env = env or capture_environment(targets)
    log(f"environment: {env['metadata']['title']}; ceilings {env['spec']['ceilings']}; "
        f"spin clock {max_sm_clock_hz() / 1e6:.0f} MHz")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    with gzip.open(out_path, "wt", encoding="utf-8") as fh:
        for target in targets:
            t0 = time.time()
            impl = adapters[target["kernel"]]
            try:
                corr = check_correctness(impl, target["providers"], target["params"], target["dtype"], "cuda")
            except Exception as exc:  # noqa: BLE001 - one target's crash does not end the session
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
                except Exception as exc:  # noqa: BLE001 - recorded as a failed provider
                    log(f"  {target['kernel']} {p}: memory measurement crashed: {exc!r}")
                    corr[p] = dict(corr[p], status="failed", reason=f"measurement crashed: {exc!r}"[:500])
                    passed.remove(p)
                    release_memory()
            if "latency" in metrics and passed:
                try:
                    for p, st in measure_latency(impl, target, passed).items():
                        stats[p].update(st)
                        host = {m: s.get("host_enqueue_ns") for (m, _k), s in st.items()}
                        log(f"  {target['kernel']} {p}: host enqueue ns per pass {host}")
                except Exception as exc:  # noqa: BLE001 - recorded as failed providers
                    log(f"  {target['kernel']}: latency measurement crashed: {exc!r}")
                    for p in passed:
                        corr[p] = dict(corr[p], status="failed", reason=f"measurement crashed: {exc!r}"[:500])
                    release_memory()
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
                        rec = evidence_record(target, impl, provider, c.get("label") or provider, mode, metric, st,
                                              c, env, observed_at)
                        records.append(rec)
                        fh.write(json.dumps(rec, sort_keys=True) + "\n")
                fh.flush()
            log(f"  done {target['kernel']} {target['params']} {target['dtype']} in {time.time() - t0:.1f}s")
    return records


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelindex_pipeline.gpu.rerun", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="evidence file to write (.jsonl.gz)")
    ap.add_argument("--targets", choices=["seeds", "all"], default="seeds")
    ap.add_argument("--kernels", nargs="*", help="only these kernels")
    args = ap.parse_args(argv)
    if not cuda_available():
        print(NO_CUDA_MESSAGE, file=sys.stderr)
        return 2
    from kernelindex_pipeline.gpu.records import summary_table
    from kernelindex_pipeline.gpu.targets import targets_named

    records = run_reruns(targets_named(args.targets, args.kernels), args.out)
    print(summary_table(records))
    print(f"wrote {len(records)} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
