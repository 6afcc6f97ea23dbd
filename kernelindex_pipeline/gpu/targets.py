"""Which workloads a rerun session measures. Parameter names and values pair with upstream Liger-Kernel runs.

``warehouse_targets`` derives them from the warehouse's source comparison groups;
``python -m kernelindex_pipeline.gpu.targets --warehouse <home> --out targets.json`` exports them for a
device that has no warehouse (``python -m kernelindex_pipeline.gpu.rerun --targets-file targets.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import kernels
from kernels.adapter import load_adapter

from kernelindex_pipeline.core.catalog import CARDS_VALUES, GPUS, SOURCE_NATIVE, gpu_label_sql
from kernelindex_pipeline.gpu.protocol import TIMED_MODES
from kernelindex_pipeline.gpu.workloads import PROVIDER_TAGS, input_bytes, tagged, tensor_dtype, write_targets

THREE = ["liger", "huggingface", "kernelindex"]


def _t(kernel, params, dtype="bf16", providers=THREE, modes=TIMED_MODES, metrics=("latency", "peak_memory")):
    return {"kernel": kernel, "params": dict(params), "dtype": dtype, "providers": list(providers),
            "modes": list(modes), "metrics": list(metrics)}


SEED_TARGETS = [
    _t("llama4_rope", {"seq": 2048, "hidden": 2048, "q_heads": 32, "kv_heads": 8}),
    _t("geglu", {"batch": 8, "seq": 8192, "hidden": 4096, "intermediate": 11008}),
]

MORE_TARGETS = [
    # llama4_rope: the H sweep (seq 2048) and the largest T point (hidden 8192)
    _t("llama4_rope", {"seq": 2048, "hidden": 8192, "q_heads": 32, "kv_heads": 8}),
    _t("llama4_rope", {"seq": 16384, "hidden": 8192, "q_heads": 32, "kv_heads": 8}),
    # rope (Llama cos/sin): same sweeps
    _t("rope", {"seq": 2048, "hidden": 2048, "q_heads": 32, "kv_heads": 8}),
    _t("rope", {"seq": 2048, "hidden": 8192, "q_heads": 32, "kv_heads": 8}),
    _t("rope", {"seq": 16384, "hidden": 8192, "q_heads": 32, "kv_heads": 8}),
    # geglu: a smaller T point of the same sweep
    _t("geglu", {"batch": 8, "seq": 2048, "hidden": 4096, "intermediate": 11008}),
    # swiglu (B=4)
    _t("swiglu", {"batch": 4, "seq": 2048, "hidden": 4096, "intermediate": 11008}),
    _t("swiglu", {"batch": 4, "seq": 8192, "hidden": 4096, "intermediate": 11008}),
    # rms_norm (M=2048 rows, eps 1e-6), H sweep
    _t("rms_norm", {"rows": 2048, "hidden": 1024, "eps": 1e-06}),
    _t("rms_norm", {"rows": 2048, "hidden": 4096, "eps": 1e-06}),
    _t("rms_norm", {"rows": 2048, "hidden": 16384, "eps": 1e-06}),
    # layer_norm (M=4096 rows, fp32, eps 1e-6), N sweep
    _t("layer_norm", {"rows": 4096, "hidden": 1024, "eps": 1e-06}, dtype="fp32"),
    _t("layer_norm", {"rows": 4096, "hidden": 4096, "eps": 1e-06}, dtype="fp32"),
    _t("layer_norm", {"rows": 4096, "hidden": 16384, "eps": 1e-06}, dtype="fp32"),
]


def targets_named(which: str, kernels: list[str] | None = None) -> list[dict]:
    if which == "seeds":
        chosen = list(SEED_TARGETS)
    elif which == "all":
        chosen = SEED_TARGETS + MORE_TARGETS
    else:
        raise ValueError(f"unknown target set {which!r}; expected seeds or all")
    if kernels:
        chosen = [t for t in chosen if t["kernel"] in kernels]
    return chosen


SOURCE_GROUPS_SQL = f"""
SELECT r.kernel, w.workload_digest, any_value(w.definition) AS definition,
    list(DISTINCT r.provider ORDER BY r.provider) AS providers,
    list(DISTINCT r.operation_mode ORDER BY r.operation_mode) AS modes,
    list(DISTINCT r.metric ORDER BY r.metric) AS metrics
FROM ranks k JOIN runs r USING (run_id) JOIN workloads w USING (workload_digest)
WHERE r.evidence_level = '{SOURCE_NATIVE}' AND list_contains(?, r.kernel)
GROUP BY r.kernel, w.workload_digest
"""

AWAITING_RERUN_SQL = """
SELECT DISTINCT r.kernel, r.workload_digest FROM claim_checks c JOIN runs r ON r.run_id = c.a_run_id
WHERE c.awaiting_rerun
"""

# Workloads of claims made on a card model (the source's model, ?) that no rerun on that model has checked yet.
NOT_ON_OWN_MODEL_SQL = f"""
SELECT DISTINCT r.kernel, r.workload_digest
FROM claim_checks c JOIN runs r ON r.run_id = c.a_run_id
    JOIN (VALUES {CARDS_VALUES}) g(device, gpu, form_factor) ON c.source_gpu = {gpu_label_sql('g')}
WHERE g.gpu = ? AND (c.card_match = 'other_card' OR (c.card_match IS NULL AND c.awaiting_rerun))
"""

# Providers whose newest rerun of a workload had no adapter to build them then (their claims are unchecked).
PROVIDER_MISSING_SQL = """
SELECT DISTINCT kernel, workload_digest, provider FROM (
    SELECT * FROM controlled_runs
    QUALIFY row_number() OVER (PARTITION BY kernel, workload_digest, provider, family
                               ORDER BY observed_at DESC, evidence_file DESC) = 1)
WHERE status_code = 'no_rerun_provider'
"""


# Workloads whose claims wait for a rerun at the Liger-Kernel release the source measured (`version_checks`
# rows a session at that release could still settle), and whether any rerun at that release measured the
# workload yet.
VERSION_TARGETS_SQL = """
SELECT DISTINCT v.source_liger_version, r.workload_digest, v.a_provider, v.b_provider,
    EXISTS (SELECT 1 FROM controlled_runs c WHERE c.workload_digest = r.workload_digest
            AND c.liger_version = v.source_liger_version) AS measured
FROM version_checks v JOIN runs r ON r.run_id = v.a_run_id
WHERE v.version_effect = 'not_run' AND v.awaiting_rerun
"""


def _bytes(kernel: str, params: dict, dtype: str) -> float:
    nbytes = input_bytes(kernel, params, dtype)
    return float("inf") if nbytes is None else nbytes


def coverage_first(targets: list[dict]) -> list[dict]:
    """Each kernel's smallest workload first (kernels in name order), then the rest, smallest first."""
    ranked = sorted(targets, key=lambda t: (_bytes(t["kernel"], t["params"], tensor_dtype(t)), t["kernel"],
                                            json.dumps(t["params"], sort_keys=True), t["dtype"] or ""))
    first, rest, seen = [], [], set()
    for t in ranked:
        (rest if t["kernel"] in seen else first).append(t)
        seen.add(t["kernel"])
    return sorted(first, key=lambda t: t["kernel"]) + rest


def impl_providers(kernel: str) -> tuple[str, ...]:
    return tuple(load_adapter(kernel).PROVIDERS)


def warehouse_targets(con, only: list[str] | None = None, only_unchecked: bool = False,
                      own_card: str | None = None) -> list[dict]:
    """Rerun targets from the current source-native ranked runs: one per kernel family and distinct
    (workload parameters, dtype), with the providers the source compares that the adapter can build
    (the others listed as ``unavailable``; KernelIndex's own where the adapter has one) and the modes
    the source measured, in ``coverage_first`` order. A provider the source names by its Liger backend tag
    (``PROVIDER_TAGS``) is measured by the adapter provider it renames, listed in ``aliases``.
    ``only_unchecked``: only workloads awaiting a rerun, those with a claim that is not re-checked for want
    of (sampled) rerun evidence or of a provider the adapters can build now.
    ``own_card`` (a device name, as ``torch.cuda.get_device_name`` gives it): only workloads with a claim made
    on that card's model that no rerun on the model has checked, for a session on that card."""
    chosen = [k for k in kernels.FAMILIES if only is None or k in only]
    awaiting = set(con.execute(AWAITING_RERUN_SQL).fetchall()) if only_unchecked else None
    if own_card is not None:
        if own_card not in GPUS:
            raise ValueError(f"unknown card {own_card!r}; expected one of {sorted(GPUS)}")
        on_model = set(con.execute(NOT_ON_OWN_MODEL_SQL, [GPUS[own_card].product]).fetchall())
        awaiting = on_model if awaiting is None else awaiting | on_model
    missing = {}
    if only_unchecked:
        for kernel, digest, provider in con.execute(PROVIDER_MISSING_SQL).fetchall():
            missing.setdefault((kernel, digest), set()).add(provider)
    merged: dict[tuple, dict] = {}
    for kernel, workload_digest, definition, providers, modes, metrics in con.execute(SOURCE_GROUPS_SQL, [chosen]).fetchall():
        if awaiting is not None and (kernel, workload_digest) not in awaiting and not any(
                p in impl_providers(kernel) or tagged(p, impl_providers(kernel))
                for p in missing.get((kernel, workload_digest), ())):
            continue
        spec = json.loads(definition)["spec"]
        modes = [m for m in TIMED_MODES if m in modes]
        if not modes:
            continue
        impl = load_adapter(kernel)
        key = (kernel, json.dumps(spec["parameters"], sort_keys=True), spec["dtype"])
        t = merged.setdefault(key, {
            "kernel": kernel, "params": spec["parameters"], "dtype": spec["dtype"], "implied": spec.get("implied") or {},
            "tensor_dtype": spec["dtype"] or kernels.lookup(kernel).script_dtype,
            "workload_digests": [], "source_providers": [], "modes": [], "metrics": []})
        t["workload_digests"].append(workload_digest)
        for field, values in (("source_providers", providers), ("modes", modes), ("metrics", metrics)):
            t[field] = sorted(set(t[field]) | set(values))
        t["_providers"] = impl.PROVIDERS
    targets = []
    for t in merged.values():
        known = t.pop("_providers")
        t["providers"] = [p for p in known if p in t["source_providers"] or p == "kernelindex"]
        t["aliases"] = {p: PROVIDER_TAGS[p].provider for p in t["source_providers"]
                        if p not in known and tagged(p, known)}
        t["providers"] += list(t["aliases"])
        t["unavailable"] = {p: f"no rerun provider for {p}" for p in t["source_providers"]
                            if p not in known and p not in t["aliases"]}
        t["modes"] = [m for m in TIMED_MODES if m in t["modes"]]
        t["metrics"] = [m for m in ("latency", "peak_memory") if m in t["metrics"]]
        # A workload whose input shapes its parameters do not give (an upstream script that left one out)
        # cannot be built.
        if t["providers"] and input_bytes(t["kernel"], t["params"], t["tensor_dtype"]) is not None:
            targets.append(t)
    return coverage_first(targets)


# Workloads of decided claims, by kernel: what a replication session samples from.
DECIDED_WORKLOADS_SQL = """
SELECT DISTINCT c.kernel, r.workload_digest FROM claim_checks c JOIN runs r ON r.run_id = c.a_run_id
WHERE c.verdict <> 'not re-checked' ORDER BY ALL
"""

# The same, restricted to claims that reruns on one card model (?) decided in a single session so far.
UNREPLICATED_ON_MODEL_SQL = f"""
SELECT DISTINCT c.kernel, r.workload_digest
FROM claim_checks c JOIN runs r ON r.run_id = c.a_run_id JOIN controlled_runs x ON x.run_id = c.rerun_a_run_id
    JOIN (VALUES {CARDS_VALUES}) g(device, gpu, form_factor) ON g.device = x.gpu
WHERE c.verdict <> 'not re-checked' AND g.gpu = ? AND c.sessions < 2
ORDER BY ALL
"""


def replication_targets(con, fraction: float = 0.1, seed: int = 0, card: str | None = None) -> list[dict]:
    """A stratified random sample of the targets whose workloads have decided claims, for a session of its
    own that re-measures them: `fraction` of each kernel's (at least one), drawn with `seed`, so that every
    family with verdicts is replicated. With ``card`` (a device name), only workloads whose claims reruns on
    that card's model decided in one session so far: a second session on the model replicates them."""
    import random

    if card is None:
        rows = con.execute(DECIDED_WORKLOADS_SQL).fetchall()
    elif card not in GPUS:
        raise ValueError(f"unknown card {card!r}; expected one of {sorted(GPUS)}")
    else:
        rows = con.execute(UNREPLICATED_ON_MODEL_SQL, [GPUS[card].product]).fetchall()
    decided: dict[str, set[str]] = {}
    for kernel, digest in rows:
        decided.setdefault(kernel, set()).add(digest)
    eligible: dict[str, list[dict]] = {}
    for t in warehouse_targets(con, list(decided)):
        if decided[t["kernel"]] & set(t["workload_digests"]):
            eligible.setdefault(t["kernel"], []).append(t)
    rng = random.Random(seed)
    chosen = {id(t) for targets in eligible.values()
              for t in rng.sample(targets, max(1, math.ceil(fraction * len(targets))))}
    return [t for targets in eligible.values() for t in targets if id(t) in chosen]


def release_targets(con) -> dict[str, list[dict]]:
    """{Liger-Kernel release: the targets a session with that release installed measures}: the workloads of
    the claims `version_checks` has not run at the source's release, with the claims' providers alone; those
    no session at the release has measured yet first, so that a session cut short has still met the most
    claims."""
    wanted: dict[str, dict[str, set[str]]] = {}
    measured: set[tuple[str, str]] = set()
    for release, digest, a, b, seen in con.execute(VERSION_TARGETS_SQL).fetchall():
        wanted.setdefault(release, {}).setdefault(digest, set()).update((a, b))
        if seen:
            measured.add((release, digest))
    every = warehouse_targets(con)
    out = {}
    for release, workloads in sorted(wanted.items()):
        chosen = []
        for t in every:
            providers = set().union(*(workloads.get(d, set()) for d in t["workload_digests"]))
            kept = [p for p in t["providers"] if p in providers]
            if kept:
                chosen.append({**t, "providers": kept, "aliases": {p: b for p, b in t["aliases"].items() if p in kept}})
        out[release] = sorted(chosen, key=lambda t: any((release, d) in measured for d in t["workload_digests"]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelindex_pipeline.gpu.targets",
                                 description="export rerun targets derived from a warehouse's source comparison groups")
    ap.add_argument("--warehouse", required=True, help="the warehouse's KERNELINDEX_HOME")
    ap.add_argument("--out", required=True, help="targets file to write (JSON)")
    ap.add_argument("--kernels", nargs="*", help="only these kernels")
    ap.add_argument("--only-unchecked", action="store_true",
                    help="only workloads awaiting a rerun: a claim not re-checked for want of rerun evidence")
    ap.add_argument("--own-card", metavar="DEVICE",
                    help="only workloads of claims made on this card's model (a device name such as "
                    "'NVIDIA H100 80GB HBM3') that no rerun on the model has checked yet")
    ap.add_argument("--replication-sample", type=float, metavar="FRACTION",
                    help="a stratified random sample (this fraction of each kernel's workloads with verdicts, at "
                    "least one) for a replication session of its own; with --own-card, of the workloads that "
                    "reruns on that card's model decided in one session so far")
    ap.add_argument("--seed", type=int, default=0, help="the replication sample's seed")
    ap.add_argument("--at-source-release", action="store_true",
                    help="write one targets file per Liger-Kernel release the sources measured (OUT-liger-X.json): "
                    "the claims version_checks has not run at that release yet")
    args = ap.parse_args(argv)
    from kernelindex_pipeline.warehouse.store import Warehouse

    if args.at_source_release:
        with Warehouse(args.warehouse).reader() as con:
            by_release = release_targets(con)
        out = Path(args.out)
        for release, targets in by_release.items():
            targets = [t for t in targets if not args.kernels or t["kernel"] in args.kernels]
            if targets:
                path = out.with_name(f"{out.stem}-liger-{release}{out.suffix}")
                write_targets(path, targets)
                print(f"wrote {len(targets)} targets for liger-kernel {release} to {path}")
        return 0
    with Warehouse(args.warehouse).reader() as con:
        if args.replication_sample:
            targets = [t for t in replication_targets(con, args.replication_sample, args.seed, args.own_card)
                       if not args.kernels or t["kernel"] in args.kernels]
        else:
            targets = warehouse_targets(con, args.kernels or None, args.only_unchecked, args.own_card)
    write_targets(Path(args.out), targets)
    kernels_seen = list(dict.fromkeys(t["kernel"] for t in targets))
    print(f"wrote {len(targets)} targets over {len(kernels_seen)} kernels to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
