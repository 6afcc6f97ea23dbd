"""A rerun session: ``python -m kernelindex_pipeline.gpu.rerun --targets-file targets.json --out-dir DIR``.

For each target (kernel, params, dtype, providers, modes) it checks every provider's correctness once on
fresh seeded inputs, then, for providers that passed, measures them under both protocols: KernelIndex's
(peak memory, and device-time latency with all providers side by side) and the source replica (latency
as Liger-Kernel's scripts take it with ``triton.testing.do_bench``). It writes one evidence record per
(provider, mode, metric, protocol), gzipped JSONL, appended and closed after every provider so that a
session cut short keeps what it measured. Providers that cannot run, fail correctness or whose workload
does not fit on the card get records too, with their status and reason and no timings.

With ``--budget-minutes`` it measures targets in order while the next one is expected to fit, and keeps the
targets it did not reach in ``remaining.json`` (rewritten after every target), the next session's
``--targets-file``. A target whose measurement raises is logged and dropped; the session goes on.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import gc
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kernels.adapter import RerunAdapter, load_adapter
from kernelindex_pipeline.gpu import protocol as P
from kernelindex_pipeline.gpu.measure import measure_target
from kernelindex_pipeline.gpu.records import append_records, evidence_name
from kernelindex_pipeline.gpu.device import NO_CUDA_MESSAGE, cuda_available
from kernelindex_pipeline.gpu.targets import targets_named
from kernelindex_pipeline.gpu.workloads import PROVIDER_TAGS, read_targets, session_slice, write_targets

# Liger-Kernel's backend switch (liger_kernel.ops.backends.LIGER_KERNEL_IMPL_ENV).
LIGER_IMPL_VARIABLE = "LIGER_KERNEL_IMPL"
# What a target is expected to take before any target of the session has been measured.
FIRST_TARGET_ESTIMATE_S = 30.0
# A target still measuring after this long is recorded as `timeout` and the session goes on: the slowest
# finished targets take about a minute (correctness on three seeds, memory, both protocols).
TARGET_TIMEOUT_S = 240.0


class NoCudaDevice(RuntimeError):
    pass


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def protocol_metrics(target: dict, impl: RerunAdapter) -> dict[str, tuple[dict, list[str]]]:
    """{family: (protocol document per mode, metrics)} of the protocols a target is recorded under."""
    metrics = list(target.get("metrics", ["latency", "peak_memory"]))
    consumes = impl.BACKWARD_CONSUMES_GRAPH
    return {
        P.RERUN_FAMILY: ({m: P.protocol_document(m, consumes) for m in target["modes"]}, metrics),
        P.SOURCE_REPLICA_FAMILY: ({m: P.replica_protocol_document(m, consumes) for m in target["modes"]},
                                  [m for m in metrics if m == "latency"]),
    }


def target_records(target: dict, impl: RerunAdapter, outcomes: dict, stats: dict, env: dict, observed_at: str,
                   code_revision: str | None, session: str | None = None) -> dict[str, list[dict]]:
    """{provider: its records under both protocols}: every provider of the target (measured or not) and
    every provider the target lists as unavailable, for each mode and metric."""
    from kernelindex_pipeline.gpu.records import evidence_record

    out = {}
    for provider, outcome in outcomes.items():
        recs = []
        for family, (documents, metrics) in protocol_metrics(target, impl).items():
            measured = stats.get(family, {}).get(provider, {})
            result = measured.get("outcome", outcome)
            for mode in target["modes"]:
                for metric in metrics:
                    st = measured.get((mode, metric)) if result["status"] == "passed" else None
                    recs.append(evidence_record(target, impl, provider, outcome.get("label") or provider, mode, metric,
                                                st, result, env, observed_at, documents[mode], code_revision,
                                                session))
        out[provider] = recs
    return out


class _Aliased:
    """An adapter whose ``build`` also answers to providers the source names by a Liger backend tag
    (``targets.PROVIDER_TAGS``): it builds the provider they rename and says so in the label."""

    def __init__(self, impl: RerunAdapter, aliases: dict[str, str]):
        self._impl, self._aliases = impl, aliases

    def __getattr__(self, name):
        return getattr(self._impl, name)

    def build(self, provider, inputs, params):
        base = self._aliases.get(provider)
        if base is None:
            return self._impl.build(provider, inputs, params)
        built = self._impl.build(base, inputs, params)
        tag = PROVIDER_TAGS.get(provider)
        backend = f", {tag.backend} backend" if tag else ""
        return dataclasses.replace(built, label=f"{built.label}; upstream's {provider} (its {base} provider{backend})")


def with_aliases(impl: RerunAdapter, aliases: dict[str, str]) -> RerunAdapter:
    return _Aliased(impl, aliases) if aliases else impl


def run_within_budget(targets: list[dict], measure: Callable[[dict], object], budget_s: float | None = None,
                      clock: Callable[[], float] = time.monotonic, started: float | None = None,
                      after: Callable[[list[dict]], object] | None = None, log=print) -> list[dict]:
    """Measure ``targets`` in order, each only if it is expected to end within ``budget_s`` of ``started``;
    returns the targets not measured, in order. A target that is not expected to fit is left for the next
    session and the ones after it still get their turn, so a family of quick workloads is not held up by a
    slow one. A target is expected to take what the last target of its kernel took, else the median of
    those measured so far (``FIRST_TARGET_ESTIMATE_S`` before any). ``after(left)`` runs after each
    measured target with the targets still unmeasured."""
    started = clock() if started is None else started
    took: dict[str, float] = {}
    durations: list[float] = []
    left: list[dict] = []
    for i, target in enumerate(targets):
        if budget_s is not None:
            estimate = took.get(target["kernel"], statistics.median(durations) if durations else FIRST_TARGET_ESTIMATE_S)
            if clock() - started + estimate > budget_s:
                left.append(target)
                continue
        t0 = clock()
        try:
            measure(target)
        except Exception as exc:  # noqa: BLE001 - dropped, not left: the next session would fail the same way
            log(f"  harness error, target dropped: {target['kernel']} {target.get('params')}: {exc!r}")
        took[target["kernel"]] = clock() - t0
        durations.append(took[target["kernel"]])
        if after is not None:
            after(left + targets[i + 1:])
    if left:
        log(f"budget: {len(left)} targets left for the next session ({clock() - started:.0f} s used of "
            f"{budget_s:.0f} s)")
    return left


def run_reruns(targets: list[dict], out_path, env: dict | None = None, log=print, budget_s: float | None = None,
               remaining_path=None, clock: Callable[[], float] = time.monotonic,
               target_timeout_s: float | None = TARGET_TIMEOUT_S) -> list[dict]:
    """Check, measure and record ``targets`` within ``budget_s``; returns the records appended to
    ``out_path``. Every target's kernel adapter is loaded (and checked against
    ``kernels.adapter.RerunAdapter``) before anything is measured; the targets not reached are written to
    ``remaining_path`` (when given). Only the providers of this process's Liger backend (LIGER_KERNEL_IMPL,
    ``targets.session_slice``) are measured. Every record names this session (one process: its own inputs,
    seeds and warm-ups), so that verdicts can pool independent sessions."""
    if not cuda_available():
        raise NoCudaDevice(NO_CUDA_MESSAGE)
    started = clock()
    targets = session_slice(targets, os.environ.get(LIGER_IMPL_VARIABLE, ""))
    # Imported here, once CUDA is known to be there: without it, this module answers without torch.
    import torch

    from kernelindex_pipeline.gpu.device import max_sm_clock_hz
    from kernelindex_pipeline.gpu.environment import capture_environment
    from kernelindex_pipeline.gpu.provenance import kernel_revision

    adapters = {kernel: load_adapter(kernel) for kernel in dict.fromkeys(t["kernel"] for t in targets)}
    revisions = {kernel: kernel_revision(kernel) for kernel in adapters}
    torch.backends.cuda.matmul.allow_tf32 = False
    log(f"session set up in {clock() - started:.1f} s (CUDA, imports, {len(adapters)} adapters)")
    env = env or capture_environment(targets, log)
    device_bytes = torch.cuda.get_device_properties(0).total_memory
    log(f"environment: {env['metadata']['title']}; ceilings {env['spec']['ceilings']}; "
        f"spin clock {max_sm_clock_hz() / 1e6:.0f} MHz")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    session = f"{out_path.name.removesuffix('.jsonl.gz')}-{uuid.uuid4().hex[:12]}"
    log(f"session {session}")
    records: list[dict] = []
    if remaining_path is not None:
        write_targets(remaining_path, targets)

    def measure(target):
        t0 = time.time()
        impl = with_aliases(adapters[target["kernel"]], target.get("aliases", {}))
        outcomes, stats = measure_target(target, impl, device_bytes, log, timeout_s=target_timeout_s)
        by_provider = target_records(target, impl, outcomes, stats, env, _now(), revisions[target["kernel"]], session)
        for provider, recs in by_provider.items():
            o = outcomes[provider]
            if o["status"] != "passed":
                log(f"  {target['kernel']} {provider}: {o['status']} ({o.get('reason')})")
            append_records(out_path, recs)
            records.extend(recs)
        log(f"  done {target['kernel']} {target['params']} {target['dtype']} in {time.time() - t0:.1f}s")

    def after(left):
        # What the next target leaves behind is collectable now; the rest stays out of the collector's
        # scans (every gc.collect of the harness would otherwise walk torch's and Triton's objects).
        gc.collect()
        gc.freeze()
        if remaining_path is not None:
            write_targets(remaining_path, left)

    left = run_within_budget(targets, measure, budget_s, clock, started, after, log)
    if remaining_path is not None:
        write_targets(remaining_path, left)
    return records


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelindex_pipeline.gpu.rerun", description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="evidence file to write (.jsonl.gz)")
    where.add_argument("--out-dir", help="directory for <gpu>-<date>-<harness revision>.jsonl.gz and remaining.json")
    ap.add_argument("--targets", choices=["seeds", "all"], default="seeds", help="a named target set")
    ap.add_argument("--targets-file", help="targets exported by python -m kernelindex_pipeline.gpu.targets "
                    "(or a session's remaining.json); replaces --targets")
    ap.add_argument("--kernels", nargs="*", help="only these kernels")
    ap.add_argument("--budget-minutes", type=float, help="stop before the next target would run past this")
    ap.add_argument("--liger-impl", choices=sorted({t.liger_impl for t in PROVIDER_TAGS.values()} - {""}),
                    help="measure the providers upstream ran on this Liger-Kernel backend (sets LIGER_KERNEL_IMPL); "
                    "default: every other provider, Liger on its Triton backend")
    ap.add_argument("--remaining", help="where the targets not reached go (default: remaining.json beside the evidence)")
    ap.add_argument("--target-timeout", type=float, default=TARGET_TIMEOUT_S,
                    help=f"seconds before a target still measuring is recorded as timeout (default {TARGET_TIMEOUT_S:g})")
    args = ap.parse_args(argv)
    if args.liger_impl:
        # Before anything imports liger_kernel, which reads it once.
        os.environ[LIGER_IMPL_VARIABLE] = args.liger_impl
    if not cuda_available():
        print(NO_CUDA_MESSAGE, file=sys.stderr)
        return 2
    import torch

    from kernelindex_pipeline.gpu.provenance import harness_revision
    from kernelindex_pipeline.gpu.records import compact_records, summary_table

    if args.targets_file:
        chosen = read_targets(args.targets_file)
        if args.kernels:
            chosen = [t for t in chosen if t["kernel"] in args.kernels]
    else:
        chosen = targets_named(args.targets, args.kernels)
    if args.out:
        out = Path(args.out)
    else:
        day = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
        out = Path(args.out_dir) / evidence_name(torch.cuda.get_device_name(0), day, harness_revision())
    remaining = Path(args.remaining) if args.remaining else out.parent / "remaining.json"
    budget = args.budget_minutes * 60 if args.budget_minutes is not None else None
    try:
        records = run_reruns(chosen, out, budget_s=budget, remaining_path=remaining, target_timeout_s=args.target_timeout)
    finally:  # also when the session is interrupted
        compact_records(out)
    print(summary_table(records))
    left = len(read_targets(remaining))
    print(f"wrote {len(records)} records to {out}; {left} targets left in {remaining}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
