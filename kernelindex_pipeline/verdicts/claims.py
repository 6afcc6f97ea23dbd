"""Claim checks: every source claim, re-checked by KernelIndex's reruns under both protocols, with a verdict.

A *source claim* is an ordered pair (a, b) of implementations in a current source comparison group
(`ranks` of source-native runs): a ranks ahead of b, so the source says a's median is lower (a parity
claim when they tie). For each claim and each rerun protocol, the rerun evidence of the same kernel,
pass, metric and workload is looked up on KernelIndex's GPU: the newest rerun batch (one evidence file)
that measured both a and b side by side. Verdicts compare orders and ratios, never absolute times across
GPUs; their statistics are in `rule.py`, the query that finds each claim's sessions in `candidates.sql`. A claim with no usable rerun says why (`not re-checked`).
Claims are checked for the source groups in `scope_groups` (see runs/ranking.py).

Long because the steps that turn a claim's sessions into verdicts (why a claim has none, pooling its sessions,
widening a single one, the checks at the source's own release) read the rows of one query and belong together.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

import kernels

from kernelindex_pipeline.core import catalog, reasons
from kernelindex_pipeline.verdicts import rule
from kernelindex_pipeline.gpu import protocol as P
from kernelindex_pipeline.gpu.protocol import REPLICA_REPETITION_MS, TIMED_MODES
from kernelindex_pipeline.runs.published import SEED_RECORDS
from kernelindex_pipeline.warehouse.views import OTHER_DTYPE_RERUNS_SQL, SESSION_SPREAD_SQL
from kernelindex_pipeline.warehouse.sql import load_sql, records, registered

PROTOCOLS = catalog.PROTOCOLS
DEVICE_TIME, REPLICA = PROTOCOLS

SESSION_INTERVAL = pa.struct([
    ("session", pa.string()), ("evidence_file", pa.string()), ("rerun_a_run_id", pa.string()),
    ("rerun_b_run_id", pa.string()), ("rerun_ratio", pa.float64()), ("ci_low", pa.float64()),
    ("ci_high", pa.float64()), ("n_a", pa.int64()), ("n_b", pa.int64()), ("spread_a", pa.float64()),
    ("spread_b", pa.float64()), ("verdict", pa.string()), ("reason_code", pa.string()),
])

CLAIM_CHECKS_SCHEMA = pa.schema([
    ("comparison_key", pa.string()), ("kernel", pa.string()), ("operation_mode", pa.string()),
    ("metric", pa.string()), ("workload_slug", pa.string()), ("source_gpu", pa.string()),
    ("a_implementation", pa.string()), ("a_provider", pa.string()), ("a_run_id", pa.string()),
    ("b_implementation", pa.string()), ("b_provider", pa.string()), ("b_run_id", pa.string()),
    ("source_a_median", pa.int64()), ("source_b_median", pa.int64()), ("source_ratio", pa.float64()),
    ("source_order", pa.string()), ("protocol", pa.string()), ("rerun_gpu", pa.string()),
    ("evidence_file", pa.string()), ("rerun_a_run_id", pa.string()), ("rerun_b_run_id", pa.string()),
    ("rerun_ratio", pa.float64()), ("ci_low", pa.float64()), ("ci_high", pa.float64()),
    ("n_a", pa.int64()), ("n_b", pa.int64()), ("verdict", pa.string()), ("reason", pa.string()),
    ("host_bound", pa.bool_()), ("awaiting_rerun", pa.bool_()), ("spread_a", pa.float64()), ("spread_b", pa.float64()),
    ("claim_type", pa.string()), ("reason_code", pa.string()), ("source_artifact", pa.string()),
    ("sessions", pa.int32()), ("session_intervals", pa.list_(SESSION_INTERVAL)), ("between_session_sd", pa.float64()),
    ("rerun_release", pa.string()), ("card_match", pa.string()),
])

REPLICA_BUDGET_NOTE = (f"; the source's do_bench budget of {REPLICA_REPETITION_MS} ms allows no more repetitions "
                       "of a pass this long")
LATENCY_ONLY = ("the source-replica protocol times latency only; peak memory is re-checked under "
                "kernelindex-device-time")
COMPILE_UNRECORDED = ("the rerun did not record what torch.compile compiled (graphs, frames that fell back to "
                      "eager), so it may have timed eager PyTorch; a rerun that records it settles the claim")


# What a provider's failure says where the card cannot run its pass: Liger's cuTile backend targets sm_100 and
# later (tileiras does not compile its Tile IR for sm_90; its dispatcher refuses sm_90).
UNSUPPORTED_CARD_SIGNS = ("failed to compile Tile IR program", "< required sm_")


def _judged_here(row: dict, side: str, why: tuple[str, str, bool]) -> tuple[str, str, bool]:
    """A provider's recorded failure as this release and card judge it: one that says the card cannot run the
    pass becomes `unsupported_card`, awaiting a card that can; an `unavailable` that a later session with the
    same release built awaits a rerun (the release has the provider: that session's harness could not import
    it)."""
    reason, code, awaiting = why
    if code == reasons.UNAVAILABLE_PROVIDER and row[f"{side}_built_since"]:
        return (f"{reason}; a later session at this release built it, so a rerun of this workload settles the claim",
                code, True)
    if code == reasons.RAISED and any(sign in reason for sign in UNSUPPORTED_CARD_SIGNS):
        return f"{reason} (this card cannot run the pass; a card that can will settle it)", reasons.UNSUPPORTED_CARD, True
    return why


def _first_settled(answers) -> tuple[str, str, bool] | None:
    """Of both sides' failures, a settled one before one a rerun could settle, else side a's: where both
    providers failed, the claim's reason does not depend on which side the source ranked first."""
    answers = list(answers)
    return next((why for why in answers if not why[2]), answers[0] if answers else None)


def _newest_rerun_failed(row: dict, side: str) -> bool:
    """Whether a provider's newest rerun failed and is newer than the batch that measured both (which
    otherwise speaks for it)."""
    status = row[f"{side}_latest_status"]
    return status not in (None, "passed") and (row["observed_at"] is None
                                               or row[f"{side}_latest_at"] > row["observed_at"])


def _failure(row: dict, side: str, which: str) -> tuple[str, str, bool]:
    """What a failed rerun of one side says: its newest (`which` "latest_") or the batch's that measured both
    (`which` "")."""
    status, text = row[f"{side}_{which}status"], row[f"{side}_{which}reason"]
    code = row[f"{side}_{which}code"] or reasons.legacy_code(status, text)
    if code == reasons.FAILED_CORRECTNESS and (judged := _field_judgement(row, side, which)):
        return judged
    reason = f": {text}" if text else ""
    return _judged_here(row, side, (f"{row[f'{side}_provider']} {status} on the rerun{reason}", code,
                                    code in reasons.AWAITING))


def _why_not(row: dict) -> tuple[str, str, bool] | None:
    """Why a claim has no rerun pair to check: (reason, code, whether a rerun could settle it, i.e.
    ``awaiting_rerun``); None when it has a pair. A provider recorded on the rerun as unavailable, too large
    or failing is a settled answer; a missing rerun is not."""
    if row["metric"] != "latency" and row["protocol"] == REPLICA:
        return LATENCY_ONLY, reasons.LATENCY_ONLY, False
    if row["operation_mode"] not in TIMED_MODES:
        return (f"the rerun harness measures the {', '.join(TIMED_MODES)} passes, not {row['operation_mode']}",
                reasons.UNSUPPORTED_MODE, False)
    if not row["kernel_covered"]:
        return f"no KernelIndex rerun of {row['kernel']} yet", reasons.NO_RERUN, True
    if not row["workload_measured"]:
        other = row["other_dtype"] or {}
        if other.get("built"):
            return (f"re-measured only with {other['built']} tensors, while the source's script builds "
                    f"{other['script']} ones (its runs record no dtype): another workload; a rerun in "
                    f"{other['script']} settles the claim", reasons.OTHER_DTYPE, True)
        return "this workload has not been re-measured under this protocol yet", reasons.NO_RERUN, True
    # A provider whose newest rerun says it cannot run or fails settles the claim on its own: no batch that
    # also measured the other side is needed to say so.
    if why := _first_settled(_failure(row, side, "latest_") for side in ("a", "b") if _newest_rerun_failed(row, side)):
        return why
    if row["evidence_file"] is None:
        measured = set(row["measured_providers"] or [])
        missing = [p for p in (row["a_provider"], row["b_provider"]) if p not in measured]
        return ((f"{' and '.join(missing)} not re-measured for this workload" if missing
                 else f"{row['a_provider']} and {row['b_provider']} were never measured in the same batch"),
                reasons.NO_RERUN, True)
    if why := _first_settled(_failure(row, side, "") for side in ("a", "b") if row[f"{side}_status"] != "passed"):
        return why
    if row["pooled_compile_unrecorded"]:
        return COMPILE_UNRECORDED, reasons.UNVERIFIED_PROVIDER, True
    return None


# Each failed rerun with its own correctness record and the eager baseline's measured beside it (same session,
# workload, pass, metric and protocol): the first of `protocol.EAGER_BASELINES` there.
FAILED_CHECKS_SQL = f"""
SELECT f.run_id, f.correctness, b.provider, b.correctness
FROM controlled_runs f
LEFT JOIN controlled_runs b ON b.evidence_file = f.evidence_file AND b.session IS NOT DISTINCT FROM f.session
    AND b.kernel = f.kernel AND b.workload_digest = f.workload_digest AND b.operation_mode = f.operation_mode
    AND b.metric = f.metric AND b.family = f.family AND list_contains({list(P.EAGER_BASELINES)}, b.provider)
WHERE f.run_id IN (SELECT run_id FROM _failed_runs)
QUALIFY row_number() OVER (PARTITION BY f.run_id ORDER BY list_position({list(P.EAGER_BASELINES)}, b.provider)) = 1
"""


def _failed_checks(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> dict[str, tuple]:
    """{failed rerun run id: (its correctness record, the eager baseline's provider and correctness record
    beside it, or None)}, read only for the runs that failed."""
    wanted = set()
    for row in rows:
        for which in ("", "latest_"):
            for side in ("a", "b"):
                if row.get(f"{side}_{which}status") == "failed" and row.get(f"rerun_{side}_{which}run_id"):
                    wanted.add(row[f"rerun_{side}_{which}run_id"])
    if not wanted:
        return {}
    with registered(con, _failed_runs=pa.table({"run_id": pa.array(sorted(wanted), pa.string())})):
        return {run_id: (json.loads(own) if own else None, base_provider, json.loads(base) if base else None)
                for run_id, own, base_provider, base in con.execute(FAILED_CHECKS_SQL).fetchall()}


def _field_judgement(row: dict, side: str, which: str) -> tuple[str, str, bool] | None:
    """A provider that failed the protocol's fixed tolerances, judged as the field judges it
    (`protocol.field_failures`) against the eager baseline checked beside it: where it passes, (reason,
    PASSES_FIELD_RULE, True): a rerun under that rule times it; where it fails every bound, (reason with each
    error and the bounds, FAILED_CORRECTNESS, False); None where no eager baseline was checked beside it (the
    record's own reason stands)."""
    provider = row[f"{side}_provider"]
    own, baseline, base = row["_correctness"].get(row.get(f"rerun_{side}_{which}run_id"), (None, None, None))
    if own is None or base is None:
        return None
    dtype = row.get(f"{which}tensor_dtype") or row.get("tensor_dtype") or "fp32"
    upstream = kernels.lookup(row["kernel"]).test_tolerances.get(dtype)
    failures = P.field_failures(own, base, dtype, upstream, is_baseline=provider == baseline)
    if failures:
        return (f"{provider} failed correctness on the rerun, by the field's rule too (against the eager "
                f"baseline {baseline} in {dtype}): " + "; ".join(failures), reasons.FAILED_CORRECTNESS, False)
    return (f"{provider} is beyond the protocol's fixed tolerance but within the field's rule (against the eager "
            f"baseline {baseline} in {dtype}): awaiting a rerun that times it", reasons.PASSES_FIELD_RULE, True)


def _deterministic_interval(row: dict) -> rule.RatioInterval:
    """Peak memory is an exact count of allocated bytes: one measurement, an interval of zero width."""
    ratio = row["rerun_b_median"] / row["rerun_a_median"]
    return rule.RatioInterval(ratio, ratio, ratio, 1, 1, "deterministic (peak memory, bytes)",
                                  deterministic=True)


def claim_checks(con: duckdb.DuckDBPyConnection, spread: dict | None = None) -> pa.Table:
    """The `claim_checks` table: one row per source claim and rerun protocol, re-checked by the reruns of
    the newest Liger-Kernel release they used. `spread` is `session_spread(con)` where the caller has it
    already."""
    out = _checked_claims(con, "current_release.release", "true", spread)
    by_claim: dict[tuple, dict[str, str]] = {}
    for row in out:
        by_claim.setdefault((row["comparison_key"], row["a_run_id"], row["b_run_id"]), {})[row["protocol"]] = row["verdict"]
    for row in out:
        both = by_claim[(row["comparison_key"], row["a_run_id"], row["b_run_id"])]
        row["host_bound"] = rule.host_bound(both.get(DEVICE_TIME, rule.NOT_RECHECKED),
                                                both.get(REPLICA, rule.NOT_RECHECKED))
    return pa.Table.from_pylist(out, schema=CLAIM_CHECKS_SCHEMA)  # the schema's fields; a missing one is null


VERSION_CHECKS_SCHEMA = pa.schema([
    ("comparison_key", pa.string()), ("kernel", pa.string()), ("operation_mode", pa.string()), ("metric", pa.string()),
    ("workload_slug", pa.string()), ("a_provider", pa.string()), ("a_run_id", pa.string()), ("b_provider", pa.string()),
    ("b_run_id", pa.string()), ("protocol", pa.string()), ("source_liger_version", pa.string()),
    ("rerun_liger_version", pa.string()), ("verdict_at_source_version", pa.string()),
    ("verdict_at_rerun_version", pa.string()), ("version_effect", pa.string()), ("reason", pa.string()),
    ("evidence_file", pa.string()), ("rerun_ratio", pa.float64()), ("ci_low", pa.float64()), ("ci_high", pa.float64()),
    ("rerun_gpu", pa.string()), ("card_match", pa.string()), ("awaiting_rerun", pa.bool_()),
])
# The claims re-checked at the source's own release too: every one reversed under either protocol, and the
# claims of the seed records' runs.
VERSION_CLAIMS_SQL = """
SELECT DISTINCT c.comparison_key, c.a_run_id, c.b_run_id FROM cc_current c
WHERE c.verdict = 'reversed' OR EXISTS (SELECT 1 FROM runs r WHERE r.run_id IN (c.a_run_id, c.b_run_id)
                                        AND list_contains(?, r.external_id))
"""


def version_checks(con: duckdb.DuckDBPyConnection, current: pa.Table, spread: dict | None = None) -> pa.Table:
    """The `version_checks` table: each claim of `VERSION_CLAIMS_SQL` (from `current`, the claim checks just
    computed) re-checked by reruns of the Liger-Kernel release the source measured, beside its verdict at the
    reruns' current release. `version_effect`: `none` where both give the same verdict, `liger_changed`
    where they differ, `not_run` (with the reason) where the source's release has no usable rerun;
    `awaiting_rerun` where a session at that release could still settle it."""
    with registered(con, cc_current=current):
        con.execute(f"CREATE OR REPLACE TEMP TABLE _version_claims AS {VERSION_CLAIMS_SQL}", [[seed.external_id for seed in SEED_RECORDS]])
        at_source = _checked_claims(con, "cl.source_liger_version",
                                    "(cl.comparison_key, cl.a_run_id, cl.b_run_id) IN (SELECT * FROM _version_claims)",
                                    spread=spread)
        now = {(r["comparison_key"], r["a_run_id"], r["b_run_id"], r["protocol"]): r for r in current.to_pylist()}
        con.execute("DROP TABLE _version_claims")
    out = []
    for row in at_source:
        latest = now[(row["comparison_key"], row["a_run_id"], row["b_run_id"], row["protocol"])]
        awaiting = False
        if row["source_liger_version"] is None:
            effect, reason = "not_run", "the source names no Liger-Kernel release"
        elif row["verdict"] == rule.NOT_RECHECKED:
            effect, reason = "not_run", f"at liger-kernel {row['source_liger_version']}: {row['reason']}"
            awaiting = row["awaiting_rerun"]
        else:
            effect = "none" if row["verdict"] == latest["verdict"] else "liger_changed"
            reason = row["reason"]
        out.append({**{f.name: row.get(f.name) for f in VERSION_CHECKS_SCHEMA},
                    "rerun_liger_version": latest.get("rerun_release"), "verdict_at_source_version": row["verdict"],
                    "verdict_at_rerun_version": latest["verdict"], "version_effect": effect, "reason": reason,
                    "awaiting_rerun": awaiting})
    return pa.Table.from_pylist(out, schema=VERSION_CHECKS_SCHEMA)


def _checked_claims(con: duckdb.DuckDBPyConnection, release: str, claim_filter: str,
                    spread: dict | None = None) -> list[dict]:
    """The claims `claim_filter` admits, each with its verdict or the reason it has none under each
    protocol, re-checked by the reruns of Liger-Kernel `release` (an expression over the claim `cl`)."""
    # The candidates' query reads every rerun whatever the scope: a publication that changed no group skips it.
    [(groups,)] = con.execute("SELECT count(*) FROM scope_groups").fetchall()
    if not groups:
        return []
    compiled = catalog.compiled_sql("c.kernel", "c.provider")
    rows = records(con, load_sql(__file__, "candidates.sql").format(
        protocols=catalog.PROTOCOLS_VALUES, compiled=compiled, release=release, current_release=CURRENT_RELEASE_SQL,
        other_dtype_reruns=OTHER_DTYPE_RERUNS_SQL,
        claim_filter=claim_filter, gpu_a=catalog.gpu_label_sql("a"), source_native=catalog.SOURCE_NATIVE,
        cards=catalog.CARDS_VALUES, card_matches=list(catalog.CARD_MATCHES)))
    artifacts = source_artifacts(con)
    checks = _failed_checks(con, rows)
    latency, out = [], []
    for row in rows:
        row["source_ratio"] = row["source_b_median"] / row["source_a_median"] if row["source_a_median"] else None
        row["source_order"] = ("parity" if row["source_a_median"] == row["source_b_median"]
                               else f"{row['a_provider']} < {row['b_provider']}")
        row["claim_type"] = rule.claim_type(row["source_ratio"]) if row["source_ratio"] else None
        row["source_artifact"] = "; ".join(sorted({artifacts[r] for r in (row["a_run_id"], row["b_run_id"])
                                                   if r in artifacts})) or None
        row["_correctness"] = checks
        script = next((artifacts[r] for r in (row["a_run_id"], row["b_run_id"])
                       if artifacts.get(r, "").split(":")[0] in catalog.SCRIPT_ARTIFACT_CODES), None)
        why = ((f"source artifact: {script}; the source's series measured something other than its label, so "
                "no rerun verdict answers its claim", reasons.SOURCE_ARTIFACT, False) if script else _why_not(row))
        row["awaiting_rerun"] = False
        if why is None and row["metric"] == "peak_memory" and row["rerun_a_median"]:
            interval = _deterministic_interval(row)
            decided = rule.verdict(row["source_ratio"], interval)
            row.update(rerun_ratio=interval.ratio, ci_low=interval.low, ci_high=interval.high, n_a=1, n_b=1,
                       sessions=1, verdict=decided.verdict, reason=decided.reason, reason_code=decided.code)
        elif why is None and not (row["a_sample_count"] and row["b_sample_count"]):
            why = "the rerun evidence keeps no per-repetition samples", reasons.NO_SAMPLES, True
        if why is not None:
            row.update(rerun_ratio=None, ci_low=None, ci_high=None, n_a=None, n_b=None, sessions=None,
                       verdict=rule.NOT_RECHECKED, reason=why[0], reason_code=why[1], awaiting_rerun=why[2])
        elif "verdict" not in row:
            latency.append(row)
        out.append(row)
    _check_latency(con, latency, spread)
    _judge_hosts(out)
    for row in out:
        # A rerun can settle only a workload whose input shapes its parameters give.
        row["awaiting_rerun"] = row["awaiting_rerun"] and row["shapes_known"]
    return out


def _judge_hosts(rows: list[dict]) -> None:
    """Withdraw each source-replica verdict its session's host decided rather than the card
    (`rule.host_bound_here`, against the same claim's device-time medians, and the source's own medians where
    the rerun is of the claim's card model): it awaits a host that can decide it."""
    device = {(r["comparison_key"], r["a_run_id"], r["b_run_id"]): r for r in rows if r["protocol"] == DEVICE_TIME}
    for row in rows:
        if row["protocol"] != REPLICA or row["verdict"] == rule.NOT_RECHECKED or row["metric"] != "latency":
            continue
        twin = device.get((row["comparison_key"], row["a_run_id"], row["b_run_id"]), {})
        replica_ns = (row["rerun_a_median"], row["rerun_b_median"])
        device_ns = (twin.get("rerun_a_median"), twin.get("rerun_b_median"))
        own_model = row.get("card_match") in ("same_card", "same_model")
        source_ns = (row["source_a_median"], row["source_b_median"]) if own_model else (None, None)
        if rule.host_bound_here(row.get("launch_floor_ns"), replica_ns, device_ns, source_ns):
            def us(ns):
                return "—" if ns is None else f"{ns / 1000:.1f}"
            floor = (f"this session's launch floor is {us(row['launch_floor_ns'])} µs under do_bench"
                     if row.get("launch_floor_ns") is not None else "this session measured no launch floor")
            source = (f", the source's do_bench {us(source_ns[0])} and {us(source_ns[1])} µs on this card model"
                      if own_model else "")
            row.update(verdict=rule.NOT_RECHECKED, reason_code=reasons.HOST_BOUND_HERE, awaiting_rerun=True, reason=(
                f"host-bound here: a and b took {us(replica_ns[0])} and {us(replica_ns[1])} µs under the replica "
                f"against {us(device_ns[0])} and {us(device_ns[1])} µs of device time{source}, and {floor} (bare "
                f"metal: {rule.BARE_METAL_FLOOR_NS / 1000:.1f} µs); awaiting a host that can decide it"))


def _check_latency(con: duckdb.DuckDBPyConnection, rows: list[dict], spread: dict | None = None) -> None:
    """Interval and verdict of each latency claim with a rerun pair, pooling its sessions; where it pooled
    several, each session's own interval and verdict too (`session_intervals`); where it has one, the
    interval widened by the spread between sessions of its kernel and protocol (`session_spread`)."""
    if spread is None:
        spread = session_spread(con) if any(len(row["session_a_run_ids"]) == 1 for row in rows) else {}
    samples = _samples_of(con, {run for r in rows for side in ("session_a_run_ids", "session_b_run_ids")
                                for run in r[side]})
    jobs = []
    for row in rows:
        paired = row["protocol"] == DEVICE_TIME  # device time interleaves a and b in the same rounds
        a_ids, b_ids = row["session_a_run_ids"], row["session_b_run_ids"]
        jobs.append({"source_ratio": row["source_ratio"], "paired": paired, "a_samples": [samples[r] for r in a_ids],
                     "b_samples": [samples[r] for r in b_ids], "a_key": tuple(a_ids), "b_key": tuple(b_ids)})
        if len(a_ids) > 1:
            jobs += [{"source_ratio": row["source_ratio"], "paired": paired, "a_samples": [samples[a]],
                      "b_samples": [samples[b]], "a_key": (a,), "b_key": (b,)} for a, b in zip(a_ids, b_ids)]
    checked = iter(_bootstrapped(con, jobs))
    for row in rows:
        pooled, between = next(checked), None
        if pooled["sessions"] == 1 and pooled["ci_low"] is not None:
            between = spread.get((row["kernel"], row["protocol"]), spread.get((None, row["protocol"])))
            pooled = _checked(row, rule.widened(_interval_of(pooled), between or 0.0))
        each = [dict(next(checked), session=session, evidence_file=file, rerun_a_run_id=a, rerun_b_run_id=b)
                for session, file, a, b in zip(row["session_keys"], row["session_files"], row["session_a_run_ids"],
                                               row["session_b_run_ids"])] if len(row["session_keys"]) > 1 else []
        row.update({k: pooled[k] for k in ("rerun_ratio", "ci_low", "ci_high", "spread_a", "spread_b", "sessions",
                                           "verdict", "reason", "reason_code")},
                   n_a=pooled["n_a"], n_b=pooled["n_b"], between_session_sd=between,
                   session_intervals=[{f.name: s.get(f.name) for f in SESSION_INTERVAL} for s in each] or None)
        # A new session settles a claim without a decisive or steady interval, except that the replica's
        # do_bench budget gives a long pass no more repetitions on any rerun.
        budget_bound = row["protocol"] == REPLICA and row["reason_code"] == reasons.TOO_FEW_REPETITIONS
        if budget_bound:
            row["reason"] += REPLICA_BUDGET_NOTE
        row["awaiting_rerun"] = (row["verdict"] == rule.NOT_RECHECKED and not budget_bound
                                 and row["reason_code"] in reasons.AWAITING)


# What a bootstrap interval is computed from besides the samples: the method as RatioInterval.method names it
# (resamples, chunks, confidence, seed), and this version of the computation.
INTERVAL_INPUTS_VERSION = "1"


def _inputs_digest(job: dict) -> str | None:
    """The digest of a bootstrap job's inputs (each session's samples of a and b, paired or not, the method);
    None where its samples cannot give an interval."""
    h = hashlib.sha256(f"{INTERVAL_INPUTS_VERSION}|{rule.bootstrap_method()}|{job['paired']}".encode())
    for side in ("a_samples", "b_samples"):
        h.update(b"|%d" % len(job[side]))
        for session in job[side]:
            if not session:
                return None
            values = np.asarray(session, dtype=np.float64)
            h.update(b"|%d:" % values.size + values.tobytes())
    return h.hexdigest()


def _bootstrapped(con: duckdb.DuckDBPyConnection, jobs: list[dict]) -> list[dict]:
    """`rule.check_claims` of each job, its interval taken from `bootstrap_intervals` where the same inputs were
    bootstrapped before; the intervals computed now are stored there."""
    digests = [_inputs_digest(job) for job in jobs]
    wanted = pa.table({"input_digest": pa.array(sorted({d for d in digests if d}), pa.string())})
    with registered(con, _wanted=wanted):
        stored = {d: rule.RatioInterval(ratio, low, high, n_a, n_b, method, spread_a, spread_b, sessions=sessions)
                  for d, ratio, low, high, n_a, n_b, spread_a, spread_b, sessions, method in con.execute(
                      "SELECT * FROM bootstrap_intervals SEMI JOIN _wanted USING (input_digest)").fetchall()}
    computed = iter(rule.check_claims([job for job, d in zip(jobs, digests) if d not in stored]))
    out, new = [], {}
    for job, digest in zip(jobs, digests):
        if digest in stored:
            out.append({**job, **_checked(job, stored[digest])})
            continue
        result = next(computed)
        out.append(result)
        if digest and result["ci_low"] is not None:
            new[digest] = result
    if new:
        fields = ("rerun_ratio", "ci_low", "ci_high", "n_a", "n_b", "spread_a", "spread_b", "sessions")
        rows = [{"input_digest": d, **{f: r[f] for f in fields},
                 "method": rule.bootstrap_method(sessions=r["sessions"], paired=r["paired"])} for d, r in new.items()]
        with registered(con, _new_intervals=pa.Table.from_pylist(rows)):
            con.execute("INSERT INTO bootstrap_intervals BY NAME SELECT * FROM _new_intervals")
    return out


def session_spread(con: duckdb.DuckDBPyConnection) -> dict[tuple[str | None, str], float]:
    """`session_spread`'s between-session sd by (kernel, protocol). It scans every rerun: a publication reads it
    once and hands it to each claim table it checks."""
    return {(kernel, protocol): sd for kernel, protocol, sd in con.execute(
        f"SELECT kernel, protocol, between_session_sd FROM ({SESSION_SPREAD_SQL})").fetchall()}


# The newest Liger-Kernel release any rerun used: the release `claim_checks` re-checks every claim at.
CURRENT_RELEASE_SQL = """
SELECT arg_max(liger_version, list_transform(string_split(liger_version, '.'), lambda x: TRY_CAST(x AS INTEGER)))
    AS release
FROM controlled_runs
"""


@dataclass(frozen=True)
class EvidenceState:
    """What every claim's check reads of all the evidence, not only of its own kernel's reruns."""

    spread: dict[tuple[str | None, str], float]
    release: str | None

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection) -> "EvidenceState":
        [(release,)] = con.execute(CURRENT_RELEASE_SQL).fetchall()
        return cls(session_spread(con), release)


def kernels_to_recheck(con: duckdb.DuckDBPyConnection, before: EvidenceState, after: EvidenceState) -> list[str] | None:
    """The kernels whose claims the evidence just added (`c_loaded`) can change, `before` and `after` being what
    the evidence read before it and with it: the kernels of its runs, those whose spread between sessions it moved, and, where
    it moved a protocol's spread over all kernels, the kernels that take that one for want of their own. None
    (every claim) where it moved the release claims are re-checked at."""
    if after.release != before.release:
        return None
    kernels = {k for (k,) in con.execute("SELECT DISTINCT kernel FROM c_loaded").fetchall()}
    moved = {key for key in before.spread.keys() | after.spread.keys()
             if before.spread.get(key) != after.spread.get(key)}
    kernels |= {kernel for kernel, _ in moved if kernel is not None}
    rerun = {k for (k,) in con.execute("SELECT DISTINCT kernel FROM controlled_runs").fetchall()}
    for kernel, protocol in moved:
        if kernel is None:
            kernels |= rerun - {k for k, p in after.spread if p == protocol}
    return sorted(kernels)


def _samples_of(con: duckdb.DuckDBPyConnection, run_ids: set[str]) -> dict[str, list[float]]:
    """The per-repetition samples of controlled runs, by run id."""
    with registered(con, _sampled=pa.table({"run_id": pa.array(sorted(run_ids), pa.string())})):
        found = dict(con.execute("SELECT run_id, samples FROM controlled_runs SEMI JOIN _sampled USING (run_id)").fetchall())
    return found


def _interval_of(result: dict) -> rule.RatioInterval:
    """The interval a check_claims result holds."""
    return rule.RatioInterval(result["rerun_ratio"], result["ci_low"], result["ci_high"], result["n_a"],
                                  result["n_b"], rule.bootstrap_method(), result["spread_a"], result["spread_b"],
                                  sessions=result["sessions"])


def _checked(row: dict, interval: rule.RatioInterval) -> dict:
    """What rule.check_claims gives for `row`, from an interval already computed."""
    decided = rule.verdict(row["source_ratio"], interval)
    return {"rerun_ratio": interval.ratio, "ci_low": interval.low, "ci_high": interval.high, "n_a": interval.n_a,
            "n_b": interval.n_b, "spread_a": interval.spread_a, "spread_b": interval.spread_b,
            "sessions": interval.sessions, "verdict": decided.verdict, "reason": decided.reason,
            "reason_code": decided.code}


# A source artifact is judged over a whole sweep, so a new revision can flag or clear claims of groups it does
# not touch: every claim that can carry one (a compiled provider's, one on a faulty source pass) takes its flag
# afresh at each publication.
REFLAG_SQL = """
UPDATE claim_checks SET source_artifact = (
    SELECT string_agg(DISTINCT sa.reason, '; ' ORDER BY sa.reason) FROM source_artifacts sa
    WHERE sa.run_id IN (claim_checks.a_run_id, claim_checks.b_run_id))
WHERE list_has_any([a_provider, b_provider], $compiled) OR list_contains($faulty_passes, [kernel, operation_mode])
"""


def reflag_source_artifacts(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(REFLAG_SQL, {"compiled": catalog.COMPILED_PROVIDER_NAMES,
                             "faulty_passes": [list(k) for k in catalog.ARTIFACT_PASSES]})


def source_artifacts(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """{source run id: why its series measured something other than its label}, for the runs in scope."""
    return dict(con.execute("SELECT run_id, reason FROM source_artifacts WHERE run_id IN (SELECT run_id FROM ranks "
                            "WHERE comparison_key IN (SELECT comparison_key FROM scope_groups))").fetchall())


def claims_of_run(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    """The claim checks a source run takes part in (as a or b), for `kernelindex show` and record pages."""
    cursor = con.execute(
        "SELECT * FROM claim_checks WHERE ? IN (a_run_id, b_run_id) ORDER BY protocol, a_provider, b_provider",
        [run_id])
    names = [d[0] for d in cursor.description]
    return [json.loads(json.dumps(dict(zip(names, row)), default=str)) for row in cursor.fetchall()]
