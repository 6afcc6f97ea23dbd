"""Claim checks: every source claim, re-checked by KernelIndex's reruns under both protocols, with a verdict.

A *source claim* is an ordered pair (a, b) of implementations in a current source comparison group
(`ranks` of source-native runs): a ranks ahead of b, so the source says a's median is lower (a parity
claim when they tie). For each claim and each rerun protocol, the rerun evidence of the same kernel,
pass, metric and workload is looked up on KernelIndex's GPU: the newest rerun batch (one evidence file)
that measured both a and b side by side. Verdicts compare orders and ratios, never absolute times across
GPUs; their statistics are in `verdicts.py`. A claim with no usable rerun says why (`not re-checked`).
Claims are checked for the source groups in `scope_groups` (see ranking.py).

Long because one query finds every claim's rerun sessions, and the steps that turn them into verdicts (why
a claim has none, pooling its sessions, widening a single one, the checks at the source's own release) read
its rows and belong beside it.
"""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa

from kernelindex_pipeline import catalog, reasons, verdicts
from kernelindex_pipeline.gpu.protocol import MODES, REPLICA_REPETITION_MS
from kernelindex_pipeline.published import SEED_RECORDS
from kernelindex_pipeline.views import OTHER_DTYPE_RERUNS_SQL, SESSION_SPREAD_SQL
from kernelindex_pipeline.warehouse import records

PROTOCOLS = catalog.PROTOCOLS
DEVICE_TIME, REPLICA = PROTOCOLS

# One row per source claim and protocol, with the rerun batch that re-checks it (if any) and why not, and how
# many samples each side of the batch kept (the samples themselves are read only where they are needed).
# One row per source claim and protocol, with the rerun batch that re-checks it (if any) and why not, the
# sessions its verdict pools, and how many samples each side of the batch kept (the samples themselves are read
# only where they are needed). Reruns count only at the claim's `rerun_release` of Liger-Kernel: `{release}`,
# an expression over a claim row `cl` (the newest release the reruns used, or the claim's own).
CANDIDATES_SQL = """
WITH source AS (
    SELECT r.*, k.rank FROM ranks k JOIN runs r USING (run_id)
    WHERE r.evidence_level = 'source-native' AND k.comparison_key IN (SELECT comparison_key FROM scope_groups)
), current_release AS (
    SELECT arg_max(liger_version, list_transform(string_split(liger_version, '.'), lambda x: TRY_CAST(x AS INTEGER)))
        AS release
    FROM controlled_runs
), claims AS (
    SELECT a.comparison_key, a.kernel, a.operation_mode, a.metric, a.workload_slug, a.workload_digest,
        a.gpu || coalesce(' ' || a.form_factor, '') AS source_gpu,
        a.provider AS a_provider, a.implementation AS a_implementation, a.run_id AS a_run_id,
        b.provider AS b_provider, b.implementation AS b_implementation, b.run_id AS b_run_id,
        a.median_value AS source_a_median, b.median_value AS source_b_median,
        coalesce(a.liger_version, b.liger_version) AS source_liger_version,
        coalesce((SELECT bool_or(w.shapes_known) FROM workloads w WHERE w.workload_digest = a.workload_digest), false)
            AS shapes_known
    FROM source a JOIN source b
      ON a.comparison_key = b.comparison_key AND a.run_id <> b.run_id
     AND (a.rank < b.rank OR (a.rank = b.rank AND a.provider < b.provider))
), claims_at AS (
    SELECT cl.*, {release} AS rerun_release FROM claims cl, current_release
    WHERE {claim_filter}
), protocols AS (
    SELECT * FROM (VALUES {protocols}) p(protocol, family)
), other_dtype_reruns AS (
    {other_dtype_reruns}
), built AS (
    SELECT c.* EXCLUDE (record, samples), len(c.samples) AS sample_count, p.protocol,
        c.record->>'compile' IS NULL AND {compiled} AS compile_unrecorded
    FROM controlled_runs c JOIN protocols p ON p.family = c.family
), controlled AS (
    -- a rerun of another dtype measured another workload
    SELECT * FROM built ANTI JOIN other_dtype_reruns USING (run_id)
), other_dtypes AS (
    SELECT DISTINCT b.kernel, b.operation_mode, b.metric, b.workload_digest, b.protocol, b.liger_version,
        o.tensor_dtype, o.script_dtype
    FROM built b JOIN other_dtype_reruns o USING (run_id)
), sessions AS (
    -- every rerun session that measured a and b side by side; within one, records that passed, then the run
    -- ids, so that a rebuild picks the same
    SELECT cl.comparison_key, cl.a_run_id, cl.b_run_id, p.protocol, a.session, a.evidence_file,
        a.run_id AS rerun_a_run_id, b.run_id AS rerun_b_run_id, a.status AS a_status, b.status AS b_status,
        a.status_reason AS a_reason, b.status_reason AS b_reason, a.status_code AS a_code, b.status_code AS b_code,
        a.sample_count AS a_sample_count, b.sample_count AS b_sample_count,
        a.compile_unrecorded OR b.compile_unrecorded AS compile_unrecorded,
        a.median_value AS rerun_a_median, b.median_value AS rerun_b_median,
        a.gpu || coalesce(' ' || a.form_factor, '') AS rerun_gpu, a.observed_at, a.environment_digest,
        a.protocol_digest, a.implementation_digest AS a_implementation_digest,
        b.implementation_digest AS b_implementation_digest
    FROM claims_at cl CROSS JOIN protocols p
    JOIN controlled a ON a.protocol = p.protocol AND a.kernel = cl.kernel AND a.operation_mode = cl.operation_mode
        AND a.metric = cl.metric AND a.workload_digest = cl.workload_digest AND a.provider = cl.a_provider
        AND a.liger_version = cl.rerun_release
    JOIN controlled b ON b.protocol = p.protocol AND b.evidence_file = a.evidence_file AND b.session = a.session
        AND b.kernel = a.kernel AND b.operation_mode = a.operation_mode AND b.metric = a.metric
        AND b.workload_digest = a.workload_digest AND b.provider = cl.b_provider
    QUALIFY row_number() OVER (PARTITION BY cl.comparison_key, cl.a_run_id, cl.b_run_id, p.protocol, a.evidence_file,
                                            a.session
                               ORDER BY a.status = 'passed' DESC, b.status = 'passed' DESC, a.observed_at DESC,
                                        a.run_id, b.run_id) = 1
), batches AS (
    -- the newest session
    SELECT * FROM sessions
    QUALIFY row_number() OVER (PARTITION BY comparison_key, a_run_id, b_run_id, protocol
                               ORDER BY observed_at DESC, evidence_file DESC, session DESC) = 1
), pooled AS (
    -- the sessions whose samples the verdict pools: every one that passed on the newest session's stack
    -- (environment), protocol and implementations, oldest first
    SELECT n.comparison_key, n.a_run_id, n.b_run_id, n.protocol,
        list(s.session ORDER BY s.observed_at, s.evidence_file, s.session) AS session_keys,
        list(s.evidence_file ORDER BY s.observed_at, s.evidence_file, s.session) AS session_files,
        list(s.rerun_a_run_id ORDER BY s.observed_at, s.evidence_file, s.session) AS session_a_run_ids,
        list(s.rerun_b_run_id ORDER BY s.observed_at, s.evidence_file, s.session) AS session_b_run_ids,
        bool_or(s.compile_unrecorded) AS pooled_compile_unrecorded
    FROM batches n JOIN sessions s USING (comparison_key, a_run_id, b_run_id, protocol)
    WHERE s.a_status = 'passed' AND s.b_status = 'passed' AND s.environment_digest = n.environment_digest
      AND s.protocol_digest = n.protocol_digest AND s.a_implementation_digest = n.a_implementation_digest
      AND s.b_implementation_digest = n.b_implementation_digest
    GROUP BY ALL
), measured AS (
    SELECT DISTINCT kernel, operation_mode, metric, workload_digest, provider, protocol, liger_version FROM controlled
), latest AS (
    SELECT kernel, operation_mode, metric, workload_digest, provider, protocol, liger_version, status, status_reason,
        status_code, observed_at
    FROM controlled
    QUALIFY row_number() OVER (PARTITION BY kernel, operation_mode, metric, workload_digest, provider, protocol,
                                            liger_version
                               ORDER BY observed_at DESC, evidence_file DESC, status = 'passed' DESC, run_id) = 1
), covered AS (
    SELECT DISTINCT kernel FROM controlled_runs
)
SELECT cl.*, p.protocol, b.* EXCLUDE (comparison_key, a_run_id, b_run_id, protocol, session, environment_digest,
                                      protocol_digest, a_implementation_digest, b_implementation_digest),
    po.* EXCLUDE (comparison_key, a_run_id, b_run_id, protocol),
    cl.kernel IN (SELECT kernel FROM covered) AS kernel_covered,
    EXISTS (SELECT 1 FROM measured m WHERE m.kernel = cl.kernel AND m.operation_mode = cl.operation_mode
            AND m.metric = cl.metric AND m.workload_digest = cl.workload_digest AND m.protocol = p.protocol
            AND m.liger_version = cl.rerun_release)
        AS workload_measured,
    (SELECT list(m.provider) FROM measured m WHERE m.kernel = cl.kernel AND m.operation_mode = cl.operation_mode
            AND m.metric = cl.metric AND m.workload_digest = cl.workload_digest AND m.protocol = p.protocol
            AND m.liger_version = cl.rerun_release)
        AS measured_providers,
    (SELECT {{'built': min(o.tensor_dtype), 'script': min(o.script_dtype)}} FROM other_dtypes o
     WHERE o.kernel = cl.kernel AND o.operation_mode = cl.operation_mode AND o.metric = cl.metric
       AND o.workload_digest = cl.workload_digest AND o.protocol = p.protocol AND o.liger_version = cl.rerun_release)
        AS other_dtype,
    la.status AS a_latest_status, la.status_reason AS a_latest_reason, la.status_code AS a_latest_code,
    la.observed_at AS a_latest_at,
    lb.status AS b_latest_status, lb.status_reason AS b_latest_reason, lb.status_code AS b_latest_code,
    lb.observed_at AS b_latest_at
FROM claims_at cl CROSS JOIN protocols p
LEFT JOIN batches b ON b.comparison_key = cl.comparison_key AND b.a_run_id = cl.a_run_id
    AND b.b_run_id = cl.b_run_id AND b.protocol = p.protocol
LEFT JOIN pooled po ON po.comparison_key = cl.comparison_key AND po.a_run_id = cl.a_run_id
    AND po.b_run_id = cl.b_run_id AND po.protocol = p.protocol
LEFT JOIN latest la ON la.protocol = p.protocol AND la.kernel = cl.kernel AND la.operation_mode = cl.operation_mode
    AND la.metric = cl.metric AND la.workload_digest = cl.workload_digest AND la.provider = cl.a_provider
    AND la.liger_version = cl.rerun_release
LEFT JOIN latest lb ON lb.protocol = p.protocol AND lb.kernel = cl.kernel AND lb.operation_mode = cl.operation_mode
    AND lb.metric = cl.metric AND lb.workload_digest = cl.workload_digest AND lb.provider = cl.b_provider
    AND lb.liger_version = cl.rerun_release
"""

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
    ("rerun_release", pa.string()),
])

# The intervals already computed for rerun pairs: an interval depends only on the reruns' samples, so a
# publication that brings no new evidence (the only kind that reuses them) takes them as they are.
KNOWN_INTERVALS_SQL = """
SELECT DISTINCT ON (c.rerun_a_run_id, c.rerun_b_run_id) c.rerun_a_run_id, c.rerun_b_run_id, c.rerun_ratio,
    c.ci_low, c.ci_high, c.n_a, c.n_b, c.spread_a, c.spread_b, c.sessions, c.session_intervals, c.between_session_sd
FROM claim_checks c SEMI JOIN _pairs p USING (rerun_a_run_id, rerun_b_run_id)
WHERE c.ci_low IS NOT NULL AND c.spread_a IS NOT NULL AND c.sessions IS NOT NULL AND c.metric = 'latency'
"""


REPLICA_BUDGET_NOTE = (f"; the source's do_bench budget of {REPLICA_REPETITION_MS} ms allows no more repetitions "
                       "of a pass this long")
LATENCY_ONLY = ("the source-replica protocol times latency only; peak memory is re-checked under "
                "kernelindex-device-time")
COMPILE_UNRECORDED = ("the rerun did not record what torch.compile compiled (graphs, frames that fell back to "
                      "eager), so it may have timed eager PyTorch; a rerun that records it settles the claim")


def _why_not(row: dict) -> tuple[str, str, bool] | None:
    """Why a claim has no rerun pair to check: (reason, code, whether a rerun could settle it, i.e.
    ``awaiting_rerun``); None when it has a pair. A provider recorded on the rerun as unavailable, too large
    or failing is a settled answer; a missing rerun is not."""
    if row["metric"] != "latency" and row["protocol"] == REPLICA:
        return LATENCY_ONLY, reasons.LATENCY_ONLY, False
    if row["operation_mode"] not in MODES:
        return (f"the rerun harness measures the {', '.join(MODES)} passes, not {row['operation_mode']}",
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
    for side in ("a", "b"):
        # A provider whose newest rerun says it cannot run or fails settles the claim on its own: no batch
        # that also measured the other side is needed to say so.
        status = row[f"{side}_latest_status"]
        if status not in (None, "passed") and (row["observed_at"] is None
                                               or row[f"{side}_latest_at"] > row["observed_at"]):
            reason = f": {row[f'{side}_latest_reason']}" if row[f"{side}_latest_reason"] else ""
            code = row[f"{side}_latest_code"] or reasons.legacy_code(status, row[f"{side}_latest_reason"])
            return f"{row[f'{side}_provider']} {status} on the rerun{reason}", code, code in reasons.AWAITING
    if row["evidence_file"] is None:
        measured = set(row["measured_providers"] or [])
        missing = [p for p in (row["a_provider"], row["b_provider"]) if p not in measured]
        return ((f"{' and '.join(missing)} not re-measured for this workload" if missing
                 else f"{row['a_provider']} and {row['b_provider']} were never measured in the same batch"),
                reasons.NO_RERUN, True)
    for side in ("a", "b"):
        if row[f"{side}_status"] != "passed":
            reason = f": {row[f'{side}_reason']}" if row[f"{side}_reason"] else ""
            code = row[f"{side}_code"] or reasons.legacy_code(row[f"{side}_status"], row[f"{side}_reason"])
            return (f"{row[f'{side}_provider']} {row[f'{side}_status']} on the rerun{reason}", code,
                    code in reasons.AWAITING)
    if row["pooled_compile_unrecorded"]:
        return COMPILE_UNRECORDED, reasons.UNVERIFIED_PROVIDER, True
    return None


def _deterministic_interval(row: dict) -> verdicts.RatioInterval:
    """Peak memory is an exact count of allocated bytes: one measurement, an interval of zero width."""
    ratio = row["rerun_b_median"] / row["rerun_a_median"]
    return verdicts.RatioInterval(ratio, ratio, ratio, 1, 1, "deterministic (peak memory, bytes)",
                                  deterministic=True)


def _known_intervals(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> dict[tuple[str, str], tuple]:
    """The stored intervals of the rerun pairs in `rows`, by (rerun a, rerun b): (pooled interval, the
    between-session spread it was widened by, each session's interval where several were pooled)."""
    pairs = {(r["rerun_a_run_id"], r["rerun_b_run_id"]) for r in rows if r["rerun_a_run_id"]}
    con.register("_pairs", pa.table({"rerun_a_run_id": [a for a, _ in pairs], "rerun_b_run_id": [b for _, b in pairs]},
                                     schema=pa.schema([("rerun_a_run_id", pa.string()), ("rerun_b_run_id", pa.string())])))
    known = {}
    for a, b, ratio, low, high, n_a, n_b, spread_a, spread_b, sessions, per_session, between in con.execute(
            KNOWN_INTERVALS_SQL).fetchall():
        pooled = verdicts.RatioInterval(ratio, low, high, n_a, n_b, verdicts.bootstrap_method(), spread_a, spread_b,
                                        sessions=sessions)
        known[(a, b)] = pooled, between, [
            (s, verdicts.RatioInterval(s["rerun_ratio"], s["ci_low"], s["ci_high"], s["n_a"], s["n_b"],
                                       verdicts.bootstrap_method(), s["spread_a"], s["spread_b"]))
            for s in per_session or []]
    con.unregister("_pairs")
    return known


def claim_checks(con: duckdb.DuckDBPyConnection, reuse_intervals: bool = True) -> pa.Table:
    """The `claim_checks` table: one row per source claim and rerun protocol, re-checked by the reruns of
    the newest Liger-Kernel release they used. `reuse_intervals` takes the bootstrap intervals of a rerun
    pair from the stored rows where there are some (not when the evidence changed)."""
    out = _checked_claims(con, "current_release.release", "true", reuse_intervals)
    by_claim: dict[tuple, dict[str, str]] = {}
    for row in out:
        by_claim.setdefault((row["comparison_key"], row["a_run_id"], row["b_run_id"]), {})[row["protocol"]] = row["verdict"]
    for row in out:
        both = by_claim[(row["comparison_key"], row["a_run_id"], row["b_run_id"])]
        row["host_bound"] = verdicts.host_bound(both.get(DEVICE_TIME, verdicts.NOT_RECHECKED),
                                                both.get(REPLICA, verdicts.NOT_RECHECKED))
    return pa.Table.from_pylist(out, schema=CLAIM_CHECKS_SCHEMA)  # the schema's fields; a missing one is null


VERSION_CHECKS_SCHEMA = pa.schema([
    ("comparison_key", pa.string()), ("kernel", pa.string()), ("operation_mode", pa.string()), ("metric", pa.string()),
    ("workload_slug", pa.string()), ("a_provider", pa.string()), ("a_run_id", pa.string()), ("b_provider", pa.string()),
    ("b_run_id", pa.string()), ("protocol", pa.string()), ("source_liger_version", pa.string()),
    ("rerun_liger_version", pa.string()), ("verdict_at_source_version", pa.string()),
    ("verdict_at_rerun_version", pa.string()), ("version_effect", pa.string()), ("reason", pa.string()),
    ("evidence_file", pa.string()), ("rerun_ratio", pa.float64()), ("ci_low", pa.float64()), ("ci_high", pa.float64()),
])
# The claims re-checked at the source's own release too: every one reversed under either protocol, and the
# claims of the seed records' runs.
VERSION_CLAIMS_SQL = """
SELECT DISTINCT c.comparison_key, c.a_run_id, c.b_run_id FROM cc_current c
WHERE c.verdict = 'reversed' OR EXISTS (SELECT 1 FROM runs r WHERE r.run_id IN (c.a_run_id, c.b_run_id)
                                        AND list_contains(?, r.external_id))
"""


def version_checks(con: duckdb.DuckDBPyConnection, current: pa.Table) -> pa.Table:
    """The `version_checks` table: each claim of `VERSION_CLAIMS_SQL` (from `current`, the claim checks just
    computed) re-checked by reruns of the Liger-Kernel release the source measured, beside its verdict at the
    reruns' current release. `version_effect`: `none` where both give the same verdict, `liger_changed`
    where they differ, `not_run` (with the reason) where the source's release has no usable rerun."""
    con.register("cc_current", current)
    con.execute(f"CREATE OR REPLACE TEMP TABLE _version_claims AS {VERSION_CLAIMS_SQL}", [[seed.external_id for seed in SEED_RECORDS]])
    at_source = _checked_claims(con, "cl.source_liger_version",
                                "(cl.comparison_key, cl.a_run_id, cl.b_run_id) IN (SELECT * FROM _version_claims)",
                                reuse_intervals=False)
    now = {(r["comparison_key"], r["a_run_id"], r["b_run_id"], r["protocol"]): r for r in current.to_pylist()}
    con.execute("DROP TABLE _version_claims")
    con.unregister("cc_current")
    out = []
    for row in at_source:
        latest = now[(row["comparison_key"], row["a_run_id"], row["b_run_id"], row["protocol"])]
        if row["source_liger_version"] is None:
            effect, reason = "not_run", "the source names no Liger-Kernel release"
        elif row["verdict"] == verdicts.NOT_RECHECKED:
            effect, reason = "not_run", f"at liger-kernel {row['source_liger_version']}: {row['reason']}"
        else:
            effect = "none" if row["verdict"] == latest["verdict"] else "liger_changed"
            reason = row["reason"]
        out.append({**{f.name: row.get(f.name) for f in VERSION_CHECKS_SCHEMA},
                    "rerun_liger_version": latest.get("rerun_release"), "verdict_at_source_version": row["verdict"],
                    "verdict_at_rerun_version": latest["verdict"], "version_effect": effect, "reason": reason})
    return pa.Table.from_pylist(out, schema=VERSION_CHECKS_SCHEMA)


def _checked_claims(con: duckdb.DuckDBPyConnection, release: str, claim_filter: str, reuse_intervals: bool) -> list[dict]:
    """The claims `claim_filter` admits, each with its verdict or the reason it has none under each
    protocol, re-checked by the reruns of Liger-Kernel `release` (an expression over the claim `cl`)."""
    protocol_values = ", ".join(f"('{name}', '{family}')" for name, family in PROTOCOLS.items())
    compiled = catalog.compiled_sql("c.kernel", "c.provider")
    rows = records(con, CANDIDATES_SQL.format(protocols=protocol_values, compiled=compiled, release=release,
                                              other_dtype_reruns=OTHER_DTYPE_RERUNS_SQL,
                                              claim_filter=claim_filter))
    known = _known_intervals(con, rows) if reuse_intervals else {}
    artifacts = source_artifacts(con)
    latency, out = [], []
    for row in rows:
        row["source_ratio"] = row["source_b_median"] / row["source_a_median"] if row["source_a_median"] else None
        row["source_order"] = ("parity" if row["source_a_median"] == row["source_b_median"]
                               else f"{row['a_provider']} < {row['b_provider']}")
        row["claim_type"] = verdicts.claim_type(row["source_ratio"]) if row["source_ratio"] else None
        row["source_artifact"] = "; ".join(sorted({artifacts[r] for r in (row["a_run_id"], row["b_run_id"])
                                                   if r in artifacts})) or None
        why = _why_not(row)
        row["awaiting_rerun"] = False
        if why is None and row["metric"] == "peak_memory" and row["rerun_a_median"]:
            interval = _deterministic_interval(row)
            decided = verdicts.verdict(row["source_ratio"], interval)
            row.update(rerun_ratio=interval.ratio, ci_low=interval.low, ci_high=interval.high, n_a=1, n_b=1,
                       sessions=1, verdict=decided.verdict, reason=decided.reason, reason_code=decided.code)
        elif why is None and not (row["a_sample_count"] and row["b_sample_count"]):
            why = "the rerun evidence keeps no per-repetition samples", reasons.NO_SAMPLES, True
        if why is not None:
            row.update(rerun_ratio=None, ci_low=None, ci_high=None, n_a=None, n_b=None, sessions=None,
                       verdict=verdicts.NOT_RECHECKED, reason=why[0], reason_code=why[1], awaiting_rerun=why[2])
        elif "verdict" not in row:
            latency.append(row)
        out.append(row)
    _check_latency(con, latency, known)
    for row in out:
        # A rerun can settle only a workload whose input shapes its parameters give.
        row["awaiting_rerun"] = row["awaiting_rerun"] and row["shapes_known"]
    return out


def _check_latency(con: duckdb.DuckDBPyConnection, rows: list[dict], known: dict) -> None:
    """Interval and verdict of each latency claim with a rerun pair, pooling its sessions; where it pooled
    several, each session's own interval and verdict too (`session_intervals`); where it has one, the
    interval widened by the spread between sessions of its kernel and protocol (`session_spread`)."""
    fresh = [row for row in rows if (row["rerun_a_run_id"], row["rerun_b_run_id"]) not in known]
    spread = {(kernel, protocol): sd for kernel, protocol, sd in con.execute(
        f"SELECT kernel, protocol, between_session_sd FROM ({SESSION_SPREAD_SQL})").fetchall()}
    samples = _samples_of(con, {run for r in fresh for side in ("session_a_run_ids", "session_b_run_ids")
                                for run in r[side]})
    jobs = []
    for row in fresh:
        paired = row["protocol"] == DEVICE_TIME  # device time interleaves a and b in the same rounds
        a_ids, b_ids = row["session_a_run_ids"], row["session_b_run_ids"]
        jobs.append({"source_ratio": row["source_ratio"], "paired": paired, "a_samples": [samples[r] for r in a_ids],
                     "b_samples": [samples[r] for r in b_ids], "a_key": tuple(a_ids), "b_key": tuple(b_ids)})
        if len(a_ids) > 1:
            jobs += [{"source_ratio": row["source_ratio"], "paired": paired, "a_samples": [samples[a]],
                      "b_samples": [samples[b]], "a_key": (a,), "b_key": (b,)} for a, b in zip(a_ids, b_ids)]
    checked = iter(verdicts.check_claims(jobs))
    for row in rows:
        stored = known.get((row["rerun_a_run_id"], row["rerun_b_run_id"]))
        if stored:
            pooled, between = _checked(row, stored[0]), stored[1]
            each = [dict(s, **{k: _checked(row, i)[k] for k in ("verdict", "reason_code")}) for s, i in stored[2]]
        else:
            pooled, between = next(checked), None
            if pooled["sessions"] == 1 and pooled["ci_low"] is not None:
                between = spread.get((row["kernel"], row["protocol"]), spread.get((None, row["protocol"])))
                pooled = _checked(row, verdicts.widened(_interval_of(pooled), between or 0.0))
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
        row["awaiting_rerun"] = (row["verdict"] == verdicts.NOT_RECHECKED and not budget_bound
                                 and row["reason_code"] in reasons.AWAITING)


def _samples_of(con: duckdb.DuckDBPyConnection, run_ids: set[str]) -> dict[str, list[float]]:
    """The per-repetition samples of controlled runs, by run id."""
    con.register("_sampled", pa.table({"run_id": pa.array(sorted(run_ids), pa.string())}))
    found = dict(con.execute("SELECT run_id, samples FROM controlled_runs SEMI JOIN _sampled USING (run_id)").fetchall())
    con.unregister("_sampled")
    return found


def _interval_of(result: dict) -> verdicts.RatioInterval:
    """The interval a check_claims result holds."""
    return verdicts.RatioInterval(result["rerun_ratio"], result["ci_low"], result["ci_high"], result["n_a"],
                                  result["n_b"], verdicts.bootstrap_method(), result["spread_a"], result["spread_b"],
                                  sessions=result["sessions"])


def _checked(row: dict, interval: verdicts.RatioInterval) -> dict:
    """What verdicts.check_claims gives for `row`, from an interval already computed."""
    decided = verdicts.verdict(row["source_ratio"], interval)
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
                             "faulty_passes": [list(k) for k in catalog.SOURCE_PASS_FAULTS]})


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
