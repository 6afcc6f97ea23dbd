"""Claim checks: every source claim, re-checked by KernelIndex's reruns under both protocols, with a verdict.

A *source claim* is an ordered pair (a, b) of implementations in a current source comparison group
(`ranks` of source-native runs): a ranks ahead of b, so the source says a's median is lower (a parity
claim when they tie). For each claim and each rerun protocol, the rerun evidence of the same kernel,
pass, metric and workload is looked up on KernelIndex's GPU: the newest rerun batch (one evidence file)
that measured both a and b side by side. Verdicts compare orders and ratios, never absolute times across
GPUs; their statistics are in `verdicts.py`. A claim with no usable rerun says why (`not re-checked`).
Claims are checked for the source groups in `scope_groups` (see ranking.py).
"""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa

from kernelindex_pipeline import catalog, verdicts
from kernelindex_pipeline.gpu.protocol import MODES, REPLICA_REPETITION_MS
from kernelindex_pipeline.warehouse import records

# Rerun protocols, as claim_checks names them, and the protocol family of their evidence.
PROTOCOLS = {"kernelindex-device-time": catalog.RERUN_FAMILY, "source-replica": catalog.SOURCE_REPLICA_FAMILY}
DEVICE_TIME, REPLICA = PROTOCOLS

# One row per source claim and protocol, with the rerun batch that re-checks it (if any) and why not, and how
# many samples each side of the batch kept (the samples themselves are read only where they are needed).
CANDIDATES_SQL = """
WITH source AS (
    SELECT r.*, k.rank FROM ranks k JOIN runs r USING (run_id)
    WHERE r.evidence_level = 'source-native' AND k.comparison_key IN (SELECT comparison_key FROM scope_groups)
), claims AS (
    SELECT a.comparison_key, a.kernel, a.operation_mode, a.metric, a.workload_slug, a.workload_digest,
        a.gpu || coalesce(' ' || a.form_factor, '') AS source_gpu,
        a.provider AS a_provider, a.implementation AS a_implementation, a.run_id AS a_run_id,
        b.provider AS b_provider, b.implementation AS b_implementation, b.run_id AS b_run_id,
        a.median_value AS source_a_median, b.median_value AS source_b_median
    FROM source a JOIN source b
      ON a.comparison_key = b.comparison_key AND a.run_id <> b.run_id
     AND (a.rank < b.rank OR (a.rank = b.rank AND a.provider < b.provider))
), protocols AS (
    SELECT * FROM (VALUES {protocols}) p(protocol, family)
), controlled AS (
    SELECT c.* EXCLUDE (record), p.protocol FROM controlled_runs c JOIN protocols p ON p.family = c.family
), batches AS (
    SELECT cl.comparison_key, cl.a_run_id, cl.b_run_id, p.protocol, a.evidence_file,
        a.run_id AS rerun_a_run_id, b.run_id AS rerun_b_run_id, a.status AS a_status, b.status AS b_status,
        a.status_reason AS a_reason, b.status_reason AS b_reason, len(a.samples) AS a_sample_count,
        len(b.samples) AS b_sample_count,
        a.median_value AS rerun_a_median, b.median_value AS rerun_b_median,
        a.gpu || coalesce(' ' || a.form_factor, '') AS rerun_gpu, a.observed_at
    FROM claims cl CROSS JOIN protocols p
    JOIN controlled a ON a.protocol = p.protocol AND a.kernel = cl.kernel AND a.operation_mode = cl.operation_mode
        AND a.metric = cl.metric AND a.workload_digest = cl.workload_digest AND a.provider = cl.a_provider
    JOIN controlled b ON b.protocol = p.protocol AND b.evidence_file = a.evidence_file AND b.kernel = a.kernel
        AND b.operation_mode = a.operation_mode AND b.metric = a.metric AND b.workload_digest = a.workload_digest
        AND b.provider = cl.b_provider
    -- the newest batch; within one, records that passed, then the run ids, so that a rebuild picks the same
    QUALIFY row_number() OVER (PARTITION BY cl.comparison_key, cl.a_run_id, cl.b_run_id, p.protocol
                               ORDER BY a.observed_at DESC, a.evidence_file DESC, a.status = 'passed' DESC,
                                        b.status = 'passed' DESC, a.run_id, b.run_id) = 1
), measured AS (
    SELECT DISTINCT kernel, operation_mode, metric, workload_digest, provider, protocol FROM controlled
), latest AS (
    SELECT kernel, operation_mode, metric, workload_digest, provider, protocol, status, status_reason, observed_at
    FROM controlled
    QUALIFY row_number() OVER (PARTITION BY kernel, operation_mode, metric, workload_digest, provider, protocol
                               ORDER BY observed_at DESC, evidence_file DESC, status = 'passed' DESC, run_id) = 1
), covered AS (
    SELECT DISTINCT kernel FROM controlled_runs
)
SELECT cl.*, p.protocol, b.* EXCLUDE (comparison_key, a_run_id, b_run_id, protocol),
    cl.kernel IN (SELECT kernel FROM covered) AS kernel_covered,
    EXISTS (SELECT 1 FROM measured m WHERE m.kernel = cl.kernel AND m.operation_mode = cl.operation_mode
            AND m.metric = cl.metric AND m.workload_digest = cl.workload_digest AND m.protocol = p.protocol)
        AS workload_measured,
    (SELECT list(m.provider) FROM measured m WHERE m.kernel = cl.kernel AND m.operation_mode = cl.operation_mode
            AND m.metric = cl.metric AND m.workload_digest = cl.workload_digest AND m.protocol = p.protocol)
        AS measured_providers,
    la.status AS a_latest_status, la.status_reason AS a_latest_reason, la.observed_at AS a_latest_at,
    lb.status AS b_latest_status, lb.status_reason AS b_latest_reason, lb.observed_at AS b_latest_at
FROM claims cl CROSS JOIN protocols p
LEFT JOIN batches b ON b.comparison_key = cl.comparison_key AND b.a_run_id = cl.a_run_id
    AND b.b_run_id = cl.b_run_id AND b.protocol = p.protocol
LEFT JOIN latest la ON la.protocol = p.protocol AND la.kernel = cl.kernel AND la.operation_mode = cl.operation_mode
    AND la.metric = cl.metric AND la.workload_digest = cl.workload_digest AND la.provider = cl.a_provider
LEFT JOIN latest lb ON lb.protocol = p.protocol AND lb.kernel = cl.kernel AND lb.operation_mode = cl.operation_mode
    AND lb.metric = cl.metric AND lb.workload_digest = cl.workload_digest AND lb.provider = cl.b_provider
"""

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
])

# The bootstrap intervals already computed for rerun pairs: an interval depends only on the two reruns'
# samples, so a publication that brings no new evidence reuses them rather than resampling again.
KNOWN_INTERVALS_SQL = """
SELECT DISTINCT c.rerun_a_run_id, c.rerun_b_run_id, c.rerun_ratio, c.ci_low, c.ci_high, c.n_a, c.n_b,
    c.spread_a, c.spread_b
FROM claim_checks c SEMI JOIN _pairs p USING (rerun_a_run_id, rerun_b_run_id)
WHERE c.ci_low IS NOT NULL AND c.spread_a IS NOT NULL AND c.metric = 'latency'
"""


REPLICA_BUDGET_NOTE = (f"; the source's do_bench budget of {REPLICA_REPETITION_MS} ms allows no more repetitions "
                       "of a pass this long")
LATENCY_ONLY = ("the source-replica protocol times latency only; peak memory is re-checked under "
                "kernelindex-device-time")


def _why_not(row: dict) -> tuple[str, bool] | None:
    """Why a claim has no rerun pair to check, and whether a rerun could settle it (``awaiting_rerun``);
    None when it has a pair. A provider recorded on the rerun as unavailable, too large or failing
    correctness is a settled answer; a missing rerun is not."""
    if row["metric"] != "latency" and row["protocol"] == REPLICA:
        return LATENCY_ONLY, False
    if row["operation_mode"] not in MODES:
        return f"the rerun harness measures the {', '.join(MODES)} passes, not {row['operation_mode']}", False
    if not row["kernel_covered"]:
        return f"no KernelIndex rerun of {row['kernel']} yet", True
    if not row["workload_measured"]:
        return "this workload has not been re-measured under this protocol yet", True
    for side in ("a", "b"):
        # A provider whose newest rerun says it cannot run or fails correctness settles the claim on its
        # own: no batch that also measured the other side is needed to say so.
        status = row[f"{side}_latest_status"]
        if status not in (None, "passed") and (row["observed_at"] is None
                                               or row[f"{side}_latest_at"] > row["observed_at"]):
            reason = f": {row[f'{side}_latest_reason']}" if row[f"{side}_latest_reason"] else ""
            return f"{row[f'{side}_provider']} {status} on the rerun{reason}", False
    if row["evidence_file"] is None:
        measured = set(row["measured_providers"] or [])
        missing = [p for p in (row["a_provider"], row["b_provider"]) if p not in measured]
        return ((f"{' and '.join(missing)} not re-measured for this workload" if missing
                 else f"{row['a_provider']} and {row['b_provider']} were never measured in the same batch"), True)
    for side in ("a", "b"):
        if row[f"{side}_status"] != "passed":
            reason = f": {row[f'{side}_reason']}" if row[f"{side}_reason"] else ""
            return f"{row[f'{side}_provider']} {row[f'{side}_status']} on the rerun{reason}", False
    return None


def _deterministic_interval(row: dict) -> verdicts.RatioInterval:
    """Peak memory is an exact count of allocated bytes: one measurement, an interval of zero width."""
    ratio = row["rerun_b_median"] / row["rerun_a_median"]
    return verdicts.RatioInterval(ratio, ratio, ratio, 1, 1, "deterministic (peak memory, bytes)",
                                  deterministic=True)


def _known_intervals(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> dict[tuple[str, str], verdicts.RatioInterval]:
    """The stored bootstrap intervals of the rerun pairs in `rows`, by (rerun a, rerun b)."""
    pairs = {(r["rerun_a_run_id"], r["rerun_b_run_id"]) for r in rows if r["rerun_a_run_id"]}
    con.register("_pairs", pa.table({"rerun_a_run_id": [a for a, _ in pairs], "rerun_b_run_id": [b for _, b in pairs]},
                                     schema=pa.schema([("rerun_a_run_id", pa.string()), ("rerun_b_run_id", pa.string())])))
    known = {(a, b): verdicts.RatioInterval(ratio, low, high, n_a, n_b, verdicts.bootstrap_method(), spread_a, spread_b)
             for a, b, ratio, low, high, n_a, n_b, spread_a, spread_b in con.execute(KNOWN_INTERVALS_SQL).fetchall()}
    con.unregister("_pairs")
    return known


def claim_checks(con: duckdb.DuckDBPyConnection, reuse_intervals: bool = True) -> pa.Table:
    """The `claim_checks` table: one row per source claim and rerun protocol. `reuse_intervals` takes the
    bootstrap interval of a rerun pair from the stored rows where there is one (not when the evidence changed)."""
    protocols = ", ".join(f"('{name}', '{family}')" for name, family in PROTOCOLS.items())
    rows = records(con, CANDIDATES_SQL.format(protocols=protocols))
    known = _known_intervals(con, rows) if reuse_intervals else {}
    latency, out = [], []
    for row in rows:
        row["source_ratio"] = row["source_b_median"] / row["source_a_median"] if row["source_a_median"] else None
        row["source_order"] = ("parity" if row["source_a_median"] == row["source_b_median"]
                               else f"{row['a_provider']} < {row['b_provider']}")
        why = _why_not(row)
        row["awaiting_rerun"] = False
        if why is None and row["metric"] == "peak_memory" and row["rerun_a_median"]:
            interval = _deterministic_interval(row)
            decided = verdicts.verdict(row["source_ratio"], interval)
            row.update(rerun_ratio=interval.ratio, ci_low=interval.low, ci_high=interval.high, n_a=1, n_b=1,
                       verdict=decided.verdict, reason=decided.reason)
        elif why is None and not (row["a_sample_count"] and row["b_sample_count"]):
            why = "the rerun evidence keeps no per-repetition samples", True
        if why is not None:
            row.update(rerun_ratio=None, ci_low=None, ci_high=None, n_a=None, n_b=None,
                       verdict=verdicts.NOT_RECHECKED, reason=why[0], awaiting_rerun=why[1])
        elif "verdict" not in row:
            latency.append(row)
        out.append(row)
    fresh = [row for row in latency if (row["rerun_a_run_id"], row["rerun_b_run_id"]) not in known]
    samples = _samples_of(con, {r[side] for r in fresh for side in ("rerun_a_run_id", "rerun_b_run_id")})
    checked = dict(zip(map(id, fresh), verdicts.check_claims(
        [{"source_ratio": r["source_ratio"], "a_samples": samples[r["rerun_a_run_id"]],
          "b_samples": samples[r["rerun_b_run_id"]]} for r in fresh])))
    for row in latency:
        interval = known.get((row["rerun_a_run_id"], row["rerun_b_run_id"]))
        result = _checked(row, interval) if interval else checked[id(row)]
        row.update(rerun_ratio=result["rerun_ratio"], ci_low=result["ci_low"], ci_high=result["ci_high"],
                   spread_a=result["spread_a"], spread_b=result["spread_b"],
                   n_a=row["a_sample_count"], n_b=row["b_sample_count"], verdict=result["verdict"],
                   reason=result["reason"] + (REPLICA_BUDGET_NOTE if row["protocol"] == REPLICA
                                              and result["verdict"] == verdicts.NOT_RECHECKED else ""),
                   # Too few repetitions: a device-time rerun today takes at least MIN_REPETITIONS a side and
                   # settles it; the replica's do_bench budget gives a long pass no more on any rerun.
                   awaiting_rerun=result["verdict"] == verdicts.NOT_RECHECKED and row["protocol"] != REPLICA)
    by_claim: dict[tuple, dict[str, str]] = {}
    for row in out:
        by_claim.setdefault((row["comparison_key"], row["a_run_id"], row["b_run_id"]), {})[row["protocol"]] = row["verdict"]
    for row in out:
        both = by_claim[(row["comparison_key"], row["a_run_id"], row["b_run_id"])]
        row["host_bound"] = verdicts.host_bound(both.get(DEVICE_TIME, verdicts.NOT_RECHECKED),
                                                both.get(REPLICA, verdicts.NOT_RECHECKED))
    return pa.Table.from_pylist([{f.name: row.get(f.name) for f in CLAIM_CHECKS_SCHEMA} for row in out],
                                schema=CLAIM_CHECKS_SCHEMA)


def _samples_of(con: duckdb.DuckDBPyConnection, run_ids: set[str]) -> dict[str, list[float]]:
    """The per-repetition samples of controlled runs, by run id."""
    con.register("_sampled", pa.table({"run_id": pa.array(sorted(run_ids), pa.string())}))
    found = dict(con.execute("SELECT run_id, samples FROM controlled_runs SEMI JOIN _sampled USING (run_id)").fetchall())
    con.unregister("_sampled")
    return found


def _checked(row: dict, interval: verdicts.RatioInterval) -> dict:
    """What verdicts.check_claims gives for `row`, from an interval already computed."""
    decided = verdicts.verdict(row["source_ratio"], interval)
    return {"rerun_ratio": interval.ratio, "ci_low": interval.low, "ci_high": interval.high,
            "spread_a": interval.spread_a, "spread_b": interval.spread_b,
            "verdict": decided.verdict, "reason": decided.reason}


def claims_of_run(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    """The claim checks a source run takes part in (as a or b), for `kernelindex show` and record pages."""
    cursor = con.execute(
        "SELECT * FROM claim_checks WHERE ? IN (a_run_id, b_run_id) ORDER BY protocol, a_provider, b_provider",
        [run_id])
    names = [d[0] for d in cursor.description]
    return [json.loads(json.dumps(dict(zip(names, row)), default=str)) for row in cursor.fetchall()]
