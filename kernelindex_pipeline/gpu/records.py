"""Evidence records: one JSON object per (provider, mode, metric) of a target, as ``ingest/evidence.py`` reads them,
and the files that hold them."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

from kernels.adapter import RerunAdapter
from kernelindex_pipeline.gpu.workloads import tensor_dtype


def _clean(obj):
    """JSON-safe: non-finite floats become null, tuples lists."""
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
    """Bandwidth and FLOP rate of a pass at its median latency, and their fractions of the session's
    ceilings; all None without a latency."""
    if not median_ns:
        return {"bandwidth_tbps": None, "tflops": None, "fraction_of_copy_bandwidth": None,
                "fraction_of_matmul_rate": None}
    ceil = env["spec"]["ceilings"]
    bw = nbytes / median_ns / 1e3
    tf = nflops / median_ns / 1e3
    return {"bandwidth_tbps": _sig(bw), "tflops": _sig(tf), "fraction_of_copy_bandwidth": _sig(bw / ceil["copyTBps"]),
            "fraction_of_matmul_rate": _sig(tf / ceil["bf16MatmulTFLOPs"])}


def evidence_record(target: dict, impl: RerunAdapter, provider: str, label: str, mode: str, metric: str,
                    stats: dict | None, outcome: dict, env: dict, observed_at: str, protocol: dict,
                    code_revision: str | None = None, session: str | None = None) -> dict:
    """The record of one provider's ``metric`` in ``mode`` under ``protocol``, in rerun ``session`` (one
    process).

    ``outcome`` is the provider's correctness result: its ``status`` (passed, failed, unavailable,
    too_large, timeout) and, unless passed, its ``reason`` and ``code`` (`kernelindex_pipeline.core.reasons`);
    a compiled provider's ``compile`` says what dynamo compiled, a provider on a Liger backend's ``backend``
    which Liger Functions ran. ``stats`` is None (null timings) unless it passed;
    latency stats carry ``samples``, every repetition's time in ns."""
    params, dtype = target["params"], target["dtype"]
    nbytes = int(impl.bytes_moved(params, tensor_dtype(target), mode))
    nflops = int(impl.flops(params, mode))
    status = outcome.get("status", "failed")
    corr = {k: outcome[k] for k in ("seeds", "outputs", "gradients") if k in outcome}
    reason = None if status == "passed" else (outcome.get("reason") or status)
    if status == "failed":
        corr["reason"] = reason
    latency = metric == "latency"
    implementation = {"provider": provider, "label": label}
    if provider == "kernelindex" and code_revision:
        implementation["code_revision"] = code_revision
    return _clean({
        "kernel": target["kernel"],
        "provider": provider,
        "implementation_label": label,
        "implementation": implementation,
        "mode": mode,
        "metric": metric,
        "unit": "ns" if latency else "bytes",
        "median": stats.get("median") if stats else None,
        "p20": stats.get("p20") if stats else None,
        "p80": stats.get("p80") if stats else None,
        "samples": (list(stats["samples"]) if stats and "samples" in stats else None) if latency else None,
        "status": status,
        "reason": reason,
        "reason_code": None if status == "passed" else outcome.get("code"),
        "compile": outcome.get("compile"),
        "backend": outcome.get("backend"),
        "session": session,
        "correctness": corr,
        "params": dict(params),
        "dtype": dtype,
        "tensor_dtype": tensor_dtype(target),
        "implied": dict(impl.IMPLIED),
        "bytes": nbytes,
        "flops": nflops,
        "achieved": achieved(nbytes, nflops, stats.get("median") if (stats and latency) else None, env),
        "observed_at": observed_at,
        "protocol": protocol,
        "environment": env,
    })


def summary_table(records: list[dict]) -> str:
    """One line per record, for the end of a session's log."""
    lines = [f"{'kernel':<12} {'workload':<44} {'mode':<8} {'provider':<12} {'metric':<11} {'median':>12} "
             f"{'TB/s':>7} {'%copy':>6} {'%mm':>6} {'protocol':<16} status"]
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


def append_records(path: Path, records: list[dict]) -> None:
    """Append records to a gzipped JSONL file as one gzip member, closed at once (readable if cut short)."""
    with gzip.open(path, "at", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")


def compact_records(path: Path) -> None:
    """Rewrite an evidence file's gzip members (one per append) as one member at the highest compression:
    the same lines, in about two thirds of the bytes. The new file replaces the old one only once written whole, so
    a session stopped meanwhile still leaves the file it had."""
    path = Path(path)
    if not path.is_file():
        return
    data = gzip.decompress(path.read_bytes())
    staged = path.with_name(f".{path.name}.compact")
    staged.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    staged.replace(path)


def evidence_name(gpu_name: str, day: str, revision: str) -> str:
    """``<gpu>-<date>-<harness revision>.jsonl.gz``, the GPU as its model's short name (``h200``)."""
    words = re.findall(r"[a-z0-9]+", gpu_name.lower())
    model = next((w for w in words if re.fullmatch(r"[a-z]+\d+[a-z0-9]*", w)), "-".join(words) or "gpu")
    return f"{model}-{day}-{revision}.jsonl.gz"
